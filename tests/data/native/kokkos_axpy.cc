// strata run's real Kokkos test: named kernels, a fence, a region, a deep copy.
#include <Kokkos_Core.hpp>
#include <cstdio>

int main(int argc, char **argv)
{
    Kokkos::initialize(argc, argv);
    {
        const int n = 100000;
        Kokkos::View<double *> x("x", n), y("y", n);
        Kokkos::Profiling::pushRegion("solve");
        for (int r = 0; r < 3; r++) {
            Kokkos::parallel_for("axpy", n, KOKKOS_LAMBDA(int i) { y(i) += 2.0 * x(i) + 1.0; });
            double sum = 0;
            Kokkos::parallel_reduce("norm", n, KOKKOS_LAMBDA(int i, double &s) { s += y(i); },
                                    sum);
        }
        Kokkos::fence();
        Kokkos::Profiling::popRegion();
        auto h = Kokkos::create_mirror_view(y);
        Kokkos::deep_copy(h, y);
        std::printf("kokkos %g\n", h(0));
    }
    Kokkos::finalize();
    return 0;
}
