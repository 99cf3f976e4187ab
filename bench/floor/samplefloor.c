/*
 * samplefloor: the floor of the sampling benchmark (bench/run.py --mode sample).
 * What any in-process sampler pays just for being interrupted: one POSIX timer per
 * thread on the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID) at the
 * sampling rate, whose signal handler reads one clock and does nothing else.  What
 * a real sampler costs beyond this is its own work (walking frames, recording).
 *
 *   install(hz)          arm a timer for the calling thread, and (via
 *                        threading.setprofile) for every thread started through
 *                        `threading` afterwards
 *   uninstall()          delete the calling thread's timer, stop following threads
 *   _thread_bootstrap()  what threading.setprofile is given: a new thread calls it
 *                        once (through sys.setprofile's trampoline); it arms the
 *                        thread's timer and takes the profile hook away again
 *   signals()            the signals handled so far (a check that the timers ran)
 *
 * The signal is SIGRTMAX - 1; a thread's timer is never deleted before the thread
 * ends (the process exits soon after the script), except the caller's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "asmain.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static long interval_ns;
static volatile sig_atomic_t handled;
static volatile long long last_read;
static timer_t main_timer;
static int main_armed;

static void
handler(int sig, siginfo_t *info, void *uc)
{
    struct timespec ts;
    (void)sig; (void)info; (void)uc;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    last_read = ts.tv_nsec;
    handled = handled + 1;
}

/* A timer on the calling thread's CPU clock, firing every interval_ns. */
static int
arm_thread(timer_t *out)
{
    struct sigevent sev;
    struct itimerspec its;
    timer_t t;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGRTMAX - 1;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &t) != 0)
        return -errno;
    its.it_interval.tv_sec = interval_ns / 1000000000L;
    its.it_interval.tv_nsec = interval_ns % 1000000000L;
    its.it_value = its.it_interval;
    if (timer_settime(t, 0, &its, NULL) != 0) {
        int err = errno;
        timer_delete(t);
        return -err;
    }
    if (out)
        *out = t;
    return 0;
}

static PyObject *
thread_bootstrap(PyObject *module, PyObject *args)
{
    (void)module; (void)args;
    if (arm_thread(NULL) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    PyEval_SetProfile(NULL, NULL);
    Py_RETURN_NONE;
}

static int
follow_threads(PyObject *module, int on)
{
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *boot = on ? PyObject_GetAttrString(module, "_thread_bootstrap") : Py_None;
    PyObject *r = NULL;
    if (threading && boot)
        r = PyObject_CallMethod(threading, "setprofile", "O", boot);
    if (on)
        Py_XDECREF(boot);
    Py_XDECREF(threading);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static PyObject *
install(PyObject *module, PyObject *arg)
{
    long hz = PyLong_AsLong(arg);
    struct sigaction sa;
    int err;
    if (hz == -1 && PyErr_Occurred())
        return NULL;
    if (hz < 1 || hz > 1000000) {
        PyErr_SetString(PyExc_ValueError, "hz must be in 1..1000000");
        return NULL;
    }
    interval_ns = 1000000000L / hz;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGRTMAX - 1, &sa, NULL) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    err = arm_thread(&main_timer);
    if (err != 0) {
        errno = -err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    main_armed = 1;
    if (follow_threads(module, 1) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
uninstall(PyObject *module, PyObject *unused)
{
    (void)unused;
    if (main_armed) {
        timer_delete(main_timer);
        main_armed = 0;
    }
    if (follow_threads(module, 0) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
signals(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    return PyLong_FromLong((long)handled);
}

static PyMethodDef methods[] = {
    {"install", install, METH_O, "arm the per-thread CPU-clock timers at HZ"},
    {"uninstall", uninstall, METH_NOARGS, "delete the calling thread's timer"},
    {"_thread_bootstrap", thread_bootstrap, METH_VARARGS, "arm a new thread's timer"},
    {"signals", signals, METH_NOARGS, "signals handled so far"},
    FLOOR_RUN_MAIN_DEF,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "samplefloor", "timer-signal floor for sampling", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit_samplefloor(void)
{
    return PyModule_Create(&module_def);
}
