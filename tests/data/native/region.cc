// strata run's C++ test: the scoped region guard of <strata.h>.
#include <cstdio>

#include <strata.h>

static double work(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += i * 0.5;
    return x;
}

int main()
{
    double x;
    {
        strata::region r("scoped");
        x = work(1000000);
    }
    std::printf("%.0f\n", x);
    return 0;
}
