// strata run's C++ test program (tests/test_run.py): known call counts and a
// known hot function through -finstrument-functions. Grid::step runs 20 times,
// each calls Grid::row for the 200 inner rows (4000 calls), and row, the
// stencil's loop, has nearly all the time of the run.
#include <cstdio>
#include <utility>

namespace sim {

class Grid {
  public:
    explicit Grid(int n) : n_(n), a_(new double[n * n]), b_(new double[n * n])
    {
        for (int i = 0; i < n * n; i++)
            a_[i] = b_[i] = i % 7;
    }
    ~Grid()
    {
        delete[] a_;
        delete[] b_;
    }
    void step()
    {
        for (int i = 1; i < n_ - 1; i++)
            row(i);
        std::swap(a_, b_);
    }
    double sum() const
    {
        double s = 0;
        for (int i = 0; i < n_ * n_; i++)
            s += a_[i];
        return s;
    }

  private:
    void row(int i)
    {
        for (int r = 0; r < 8; r++) // a row's worth of work, eight sweeps
            for (int j = 1; j < n_ - 1; j++)
                b_[i * n_ + j] = 0.25 * (a_[(i - 1) * n_ + j] + a_[(i + 1) * n_ + j] +
                                         a_[i * n_ + j - 1] + a_[i * n_ + j + 1]) +
                                 1e-9 * r;
    }
    int n_;
    double *a_, *b_;
};

} // namespace sim

int main()
{
    sim::Grid g(202);
    for (int s = 0; s < 20; s++)
        g.step();
    std::printf("%.0f\n", g.sum() > 0 ? 1.0 : 0.0);
    return 0;
}
