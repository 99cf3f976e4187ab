/* Labels and verdicts: the slow paths behind the collector's caches (once per code
 * object and generation, once per C function). */
#include "python/labels.h"

#include <string.h>

#include "base/strbuf.h"

const char *st_pytext_utf8(PyObject *s, PyObject **hold)
{
    *hold = NULL;
    const char *t = PyUnicode_AsUTF8(s);
    if (t)
        return t;
    PyErr_Clear();
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
    PyObject *u = b ? PyUnicode_DecodeUTF8(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b),
                                           "backslashreplace")
                    : NULL;
    Py_XDECREF(b);
    t = u ? PyUnicode_AsUTF8(u) : NULL;
    if (!t) {
        Py_XDECREF(u);
        PyErr_Clear();
        return NULL;
    }
    *hold = u;
    return t;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void add_location(st_strbuf_t *b, PyCodeObject *co)
{
    if (!st_py.label_file && !st_py.label_line)
        return;
    PyObject *hold;
    const char *file = st_pytext_utf8(co->co_filename, &hold);
    if (!file)
        file = "?";
    st_strbuf_putc(b, '[');
    if (st_py.label_file)
        st_strbuf_puts(b, st_py.full_filepath ? file : base_name(file));
    if (st_py.label_line)
        st_strbuf_printf(b, ":%d", co->co_firstlineno);
    st_strbuf_putc(b, ']');
    Py_XDECREF(hold);
}

/* The location of a code object, cProfile's key (co_filename, co_firstlineno,
 * co_name) with its qualified name: the function a label names (core/loctab.h).
 * ST_LOC_NONE when out of memory. */
static uint32_t code_location(PyCodeObject *co)
{
    PyObject *hold;
    const char *file = st_pytext_utf8(co->co_filename, &hold);
    const char *name = PyUnicode_AsUTF8(co->co_name);
    const char *qual = PyUnicode_AsUTF8(co->co_qualname);
    uint32_t loc = ST_LOC_NONE;
    if (!file || !name || !qual ||
        st_loctab_add_qual(&st_py.session.locs, file, co->co_firstlineno, name, qual, &loc) < 0)
        loc = ST_LOC_NONE;
    Py_XDECREF(hold);
    PyErr_Clear();
    return loc;
}

/* Interns the label text in b as the label of function `loc`: its identity is the
 * pair, so functions that share a text stay apart (core/intern.h). */
static int intern_label(st_strbuf_t *b, uint32_t loc, uint32_t *id)
{
    if (b->failed)
        return -1;
    if (st_intern_tagged(&st_py.session.labels, st_strbuf_cstr(b), b->len, loc, id) < 0)
        return -1;
    if (loc != ST_LOC_NONE && st_loctab_set_id(&st_py.session.locs, *id, loc) < 0)
        return -1;
    return 0;
}

/* The running frame if it runs co (sys.monitoring gives callbacks no frame, but
 * the frame that raised the event is the thread's current one), else NULL. */
static PyFrameObject *running_frame(PyCodeObject *co)
{
    PyFrameObject *frame = PyEval_GetFrame();
    if (!frame)
        return NULL;
    PyCodeObject *fc = PyFrame_GetCode(frame);
    Py_DECREF(fc); /* the frame keeps it alive */
    return fc == co ? frame : NULL;
}

/* Appends the builtin repr of v (an object of an exact builtin type, whose repr
 * runs no code of the program); 0, or -1 if it failed (the caller falls back). */
static int put_builtin_repr(st_strbuf_t *b, PyObject *v)
{
    PyObject *r = PyObject_Repr(v);
    const char *s = r ? PyUnicode_AsUTF8(r) : NULL;
    if (s)
        st_strbuf_puts(b, s);
    Py_XDECREF(r);
    PyErr_Clear();
    return s ? 0 : -1;
}

enum { ARG_REPR_ROOM = 40 }; /* an argument's text is cut at 32 characters anyway */

/* Appends a representation of an argument that runs none of the program's code (a
 * label must not call the program's __repr__, whose effects would then happen only
 * under strata): the repr of builtin scalars and of builtin containers of them
 * (exact types; a long one cut short), else <TypeName object>. */
static void put_safe_repr(st_strbuf_t *b, PyObject *v, size_t start, int depth)
{
    if (b->len - start > ARG_REPR_ROOM)
        return;
    if (v == Py_None || v == Py_True || v == Py_False || v == Py_Ellipsis ||
        PyFloat_CheckExact(v) || PyComplex_CheckExact(v) ||
        (PyLong_CheckExact(v) && _PyLong_NumBits(v) < 4096)) {
        if (put_builtin_repr(b, v) == 0)
            return;
    } else if (PyUnicode_CheckExact(v) || PyBytes_CheckExact(v)) {
        /* only the head: the repr of a huge string would copy all of it */
        Py_ssize_t n = PyUnicode_CheckExact(v) ? PyUnicode_GET_LENGTH(v) : PyBytes_GET_SIZE(v);
        PyObject *head = n > ARG_REPR_ROOM ? PySequence_GetSlice(v, 0, ARG_REPR_ROOM)
                                           : Py_NewRef(v);
        int ok = head && put_builtin_repr(b, head) == 0;
        Py_XDECREF(head);
        PyErr_Clear();
        if (ok)
            return;
    } else if (depth < 3 && (PyTuple_CheckExact(v) || PyList_CheckExact(v))) {
        int tuple = PyTuple_CheckExact(v);
        Py_ssize_t n = tuple ? PyTuple_GET_SIZE(v) : PyList_GET_SIZE(v);
        st_strbuf_putc(b, tuple ? '(' : '[');
        for (Py_ssize_t i = 0; i < n && b->len - start <= ARG_REPR_ROOM; i++) {
            if (i)
                st_strbuf_puts(b, ", ");
            /* a list can change under us only through code this runs: none */
            put_safe_repr(b, tuple ? PyTuple_GET_ITEM(v, i) : PyList_GET_ITEM(v, i), start,
                          depth + 1);
        }
        if (tuple && n == 1)
            st_strbuf_putc(b, ',');
        st_strbuf_putc(b, tuple ? ')' : ']');
        return;
    } else if (depth < 3 && PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0;
        PyObject *key, *val;
        int first = 1;
        st_strbuf_putc(b, '{');
        while (b->len - start <= ARG_REPR_ROOM && PyDict_Next(v, &pos, &key, &val)) {
            if (!first)
                st_strbuf_puts(b, ", ");
            first = 0;
            put_safe_repr(b, key, start, depth + 1);
            st_strbuf_puts(b, ": ");
            put_safe_repr(b, val, start, depth + 1);
        }
        st_strbuf_putc(b, '}');
        return;
    }
    st_strbuf_printf(b, "<%s object>", Py_TYPE(v)->tp_name);
}

/* The label of a call with its arguments: name(a=1, b='x')[file:line]. */
__attribute__((noinline, cold)) uint32_t st_pylabel_args(PyFrameObject *frame, PyCodeObject *co, uint32_t fallback)
{
    if (!frame && !(frame = running_frame(co)))
        return fallback;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    uint32_t id = fallback;
    st_strbuf_t b, r;
    st_strbuf_init(&b);
    st_strbuf_init(&r);
    const char *name = PyUnicode_AsUTF8(co->co_qualname);
    st_strbuf_puts(&b, name ? name : "?");
    st_strbuf_putc(&b, '(');
    PyObject *locals = PyFrame_GetLocals(frame);
    PyObject *names = PyCode_GetVarnames(co);
    if (locals && names && PyTuple_Check(names)) {
        int n = co->co_argcount + co->co_kwonlyargcount;
        if (co->co_flags & CO_VARARGS)
            n++;
        if (co->co_flags & CO_VARKEYWORDS)
            n++;
        for (int i = 0; i < n && i < PyTuple_GET_SIZE(names); i++) {
            PyObject *key = PyTuple_GET_ITEM(names, i);
            PyObject *val = PyDict_Check(locals) ? Py_XNewRef(PyDict_GetItemWithError(locals, key))
                            : PyMapping_Check(locals) ? PyObject_GetItem(locals, key) : NULL;
            const char *k = PyUnicode_AsUTF8(key);
            if (i)
                st_strbuf_puts(&b, ", ");
            st_strbuf_puts(&b, k ? k : "?");
            st_strbuf_putc(&b, '=');
            st_strbuf_reset(&r);
            if (val)
                put_safe_repr(&r, val, 0, 0);
            else
                st_strbuf_puts(&r, "?");
            if (r.len > 32) {
                st_strbuf_add(&b, st_strbuf_cstr(&r), 29);
                st_strbuf_puts(&b, "...");
            } else {
                st_strbuf_puts(&b, st_strbuf_cstr(&r));
            }
            Py_XDECREF(val);
            PyErr_Clear();
        }
    }
    Py_XDECREF(locals);
    Py_XDECREF(names);
    PyErr_Clear();
    st_strbuf_putc(&b, ')');
    add_location(&b, co);
    uint32_t got, loc = code_location(co);
    if (loc != ST_LOC_NONE && intern_label(&b, loc, &got) == 0)
        id = got;
    st_strbuf_free(&b);
    st_strbuf_free(&r);
    PyErr_Restore(et, ev, tb);
    return id;
}

/* The module filters' verdict on the last file asked, per thread: a module's code
 * objects come one after another, and its file's regexes run once for them all. */
static _Thread_local struct {
    uint32_t gen; /* st_py.gen of the verdict (0: none yet) */
    int ok;
    char file[256];
} last_file;

static int keeps_module(const char *file)
{
    size_t n = strlen(file);
    int fits = n < sizeof last_file.file;
    if (fits && last_file.gen && last_file.gen == st_py.gen &&
        memcmp(last_file.file, file, n + 1) == 0)
        return last_file.ok;
    int ok = st_filter_keeps_module(&st_py.filter, file);
    if (fits && st_py.gen) {
        memcpy(last_file.file, file, n + 1);
        last_file.ok = ok;
        last_file.gen = st_py.gen;
    }
    return ok;
}

/* The code object's info, made or refreshed for this generation. NULL when out
 * of memory (the call is then not recorded). */
__attribute__((noinline, cold)) codeinfo_t *st_pylabel_code_info(PyCodeObject *co)
{
    void *extra = NULL;
    if (code_get_extra((PyObject *)co, st_py.extra_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    codeinfo_t *ci = extra;
    if (ci && ci->gen == st_py.gen)
        return ci;
    if (!ci) {
        ci = calloc(1, sizeof *ci);
        if (!ci)
            return NULL;
        if (code_set_extra((PyObject *)co, st_py.extra_index, ci) < 0) {
            PyErr_Clear();
            free(ci);
            return NULL;
        }
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *hold;
    const char *name = PyUnicode_AsUTF8(co->co_name);
    const char *file = st_pytext_utf8(co->co_filename, &hold);
    const char *qual = PyUnicode_AsUTF8(co->co_qualname);
    ci->keep = ci->module_ok = 0;
    if (name && file && qual) {
        int internal = st_py.internal_len && strncmp(file, st_py.internal_dir, st_py.internal_len) == 0;
        ci->module_ok = (st_py.include_internal || !internal) && keeps_module(file);
        ci->keep = ci->module_ok && st_filter_keeps_function(&st_py.filter, name);
    }
    Py_XDECREF(hold);
    /* The label is made at the first call that a thread can record
     * (st_pylabel_resolve), so that labels and locations stay bounded by the
     * nodes (STRATA_MAX_NODES), however many functions a program runs. */
    ci->label = ST_PATH_NONE;
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    ci->ever_kept |= ci->keep;
    ci->dynamic = (uint8_t)st_py.label_args;
    ci->gen = st_py.gen;
    code_hot_update(ci, co);
    /* --lines: chosen (its table is made at its first call, python/lines.h) */
    ci->lines = st_py.lines && ((ci->marks & MARK_PROFILE) || (st_py.lines_restrict && ci->keep));
    return ci;
}

__attribute__((noinline, cold)) uint32_t st_pylabel_resolve(codeinfo_t *ci, PyCodeObject *co)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const char *qual = PyUnicode_AsUTF8(co->co_qualname);
    uint32_t loc = qual ? code_location(co) : ST_LOC_NONE;
    if (loc != ST_LOC_NONE) {
        st_strbuf_t b;
        st_strbuf_init(&b);
        st_strbuf_puts(&b, qual);
        add_location(&b, co);
        uint32_t id;
        if (intern_label(&b, loc, &id) == 0) {
            ci->label = id;
            code_hot_update(ci, co);
        }
        st_strbuf_free(&b);
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return ci->label;
}

/* 1 when repr(o) runs only C code without side effects: the descriptors and
 * functions that a type's dictionary holds for its methods. */
static int plain_repr(PyObject *o)
{
    return Py_IS_TYPE(o, &PyMethodDescr_Type) || Py_IS_TYPE(o, &PyClassMethodDescr_Type) ||
           Py_IS_TYPE(o, &PyWrapperDescr_Type) || PyCFunction_Check(o) || PyFunction_Check(o);
}

/* Appends cProfile's name of C function `ml` bound to `self` (NULL: none) with
 * m_module `module`, as normalizeUserObj (Modules/_lsprof.c) makes it: a function
 * without self is <module.name> (<name> for builtins); a method is the repr of what
 * type(self) finds under its name (<method 'append' of 'list' objects>, the
 * defining type's name, also when called on a subclass), else
 * <built-in method module.name>, else <built-in method name> (a classmethod of
 * a built-in type: <built-in method fromkeys>). Where cProfile would call a repr
 * that could run the program's code, the last forms are used instead. */
static void cprofile_name(const PyMethodDef *ml, PyObject *self, PyObject *module,
                          st_strbuf_t *b)
{
    const char *fname = ml->ml_name;
    if (!self) {
        PyObject *modname = NULL;
        if (module && PyUnicode_Check(module))
            modname = Py_NewRef(module);
        else if (module && PyModule_Check(module))
            modname = PyModule_GetNameObject(module);
        const char *m = modname ? PyUnicode_AsUTF8(modname) : NULL;
        if (m && strcmp(m, "builtins") != 0)
            st_strbuf_printf(b, "<%s.%s>", m, fname);
        else
            st_strbuf_printf(b, "<%s>", fname);
        Py_XDECREF(modname);
        PyErr_Clear();
        return;
    }
    PyObject *name = PyUnicode_FromString(fname);
    PyObject *found = name ? _PyType_Lookup(Py_TYPE(self), name) : NULL; /* borrowed */
    Py_XINCREF(found);
    Py_XDECREF(name);
    if (found && plain_repr(found)) {
        PyObject *repr = PyObject_Repr(found);
        const char *r = repr ? PyUnicode_AsUTF8(repr) : NULL;
        if (r)
            st_strbuf_puts(b, r);
        Py_XDECREF(repr);
        if (r) {
            Py_DECREF(found);
            return;
        }
    }
    Py_XDECREF(found);
    PyErr_Clear();
    const char *m = module && PyUnicode_Check(module) ? PyUnicode_AsUTF8(module) : NULL;
    PyErr_Clear();
    if (m)
        st_strbuf_printf(b, "<built-in method %s.%s>", m, fname);
    else
        st_strbuf_printf(b, "<built-in method %s>", fname);
}

/* Label and verdict of C method `ml` bound to `self` (NULL for none) and defined
 * in `module` (a PyCFunction's m_module, or NULL), cached by method def and owner
 * (the module, or self's type for a method). */
static cfunc_entry_t *cfunc_entry(const PyMethodDef *ml, PyObject *self, PyObject *module)
{
    int is_method = self && !PyModule_Check(self);
    const void *owner = is_method ? (const void *)Py_TYPE(self) : (const void *)self;
    if (st_py.ncfunc_slots == 0 || (st_py.ncfuncs + 1) * 2 > st_py.ncfunc_slots) {
        size_t slots = st_py.ncfunc_slots ? st_py.ncfunc_slots * 2 : 256;
        cfunc_entry_t *t = calloc(slots, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < st_py.ncfunc_slots; i++) {
            if (!st_py.cfuncs[i].ml)
                continue;
            size_t j = (((uintptr_t)st_py.cfuncs[i].ml >> 4) ^ ((uintptr_t)st_py.cfuncs[i].owner >> 4)) &
                       (slots - 1);
            while (t[j].ml)
                j = (j + 1) & (slots - 1);
            t[j] = st_py.cfuncs[i];
        }
        free(st_py.cfuncs);
        st_py.cfuncs = t;
        st_py.ncfunc_slots = slots;
    }
    size_t j = (((uintptr_t)ml >> 4) ^ ((uintptr_t)owner >> 4)) & (st_py.ncfunc_slots - 1);
    while (st_py.cfuncs[j].ml && !(st_py.cfuncs[j].ml == ml && st_py.cfuncs[j].owner == owner))
        j = (j + 1) & (st_py.ncfunc_slots - 1);
    cfunc_entry_t *e = &st_py.cfuncs[j];
    if (e->ml && e->gen == st_py.gen)
        return e;
    if (!e->ml)
        st_py.ncfuncs++;
    e->ml = ml;
    e->owner = owner;
    e->gen = st_py.gen;
    e->keep = 0;

    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const char *fname = ml->ml_name;
    const char *modname_s = "builtins"; /* what the module filters see */
    PyObject *modname = NULL;
    st_strbuf_t b;
    st_strbuf_init(&b);
    /* cProfile's name (normalizeUserObj in Modules/_lsprof.c), which pstats keys by */
    cprofile_name(ml, self, module, &b);
    if (is_method) {
        modname_s = Py_TYPE(self)->tp_name;
    } else {
        if (self)
            modname = PyObject_GetAttrString(self, "__name__");
        else if (module)
            modname = Py_NewRef(module);
        if (modname && PyUnicode_Check(modname))
            modname_s = PyUnicode_AsUTF8(modname);
        if (!modname_s)
            modname_s = "?";
    }
    PyErr_Clear();
    int internal = strncmp(modname_s, "strata.", 7) == 0;
    uint32_t loc;
    if (!b.failed &&
        st_loctab_add(&st_py.session.locs, "~", 0, st_strbuf_cstr(&b), &loc) == 0) {
        /* The tables show builtins without their module, as they always have. */
        static const char builtins[] = "<built-in method builtins.";
        if (strncmp(st_strbuf_cstr(&b), builtins, sizeof builtins - 1) == 0) {
            st_strbuf_t d;
            st_strbuf_init(&d);
            st_strbuf_puts(&d, "<built-in method ");
            st_strbuf_puts(&d, st_strbuf_cstr(&b) + sizeof builtins - 1);
            st_strbuf_free(&b);
            b = d;
        }
        if (intern_label(&b, loc, &e->label) == 0)
            e->keep = (uint8_t)((st_py.include_internal || !internal) &&
                                st_filter_keeps(&st_py.filter, fname, modname_s));
    }
    Py_XDECREF(modname);
    st_strbuf_free(&b);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return e;
}

/* Label and verdict of a C function (cached by method def and owner). */
__attribute__((noinline, cold)) cfunc_entry_t *st_pylabel_cfunc(PyObject *fn)
{
    if (!PyCFunction_Check(fn))
        return NULL;
    PyCFunctionObject *cf = (PyCFunctionObject *)fn;
    return cfunc_entry(cf->m_ml, cf->m_self, cf->m_module);
}

/* Label and verdict of method ml called on self: 3.11 profiles such a call (a
 * method descriptor's) through a PyCFunction bound to self, with no module. */
__attribute__((noinline, cold)) cfunc_entry_t *st_pylabel_cmethod(const PyMethodDef *ml,
                                                                  PyObject *self)
{
    return cfunc_entry(ml, self, NULL);
}

uint32_t st_pylabel_of(PyCodeObject *co)
{
    /* 3.13+: the `__init__` cleanup shim, a static code object in read-only memory
     * (no extra slot can be set on it) that sys._getframe hides: left out too */
    if (PyUnicode_Check(co->co_name) && PyUnicode_Check(co->co_filename) &&
        PyUnicode_CompareWithASCIIString(co->co_name, "__init__") == 0 &&
        PyUnicode_CompareWithASCIIString(co->co_filename, "__init__") == 0 &&
        PyCode_Addr2Line(co, 0) < 0)
        return ST_PATH_NONE;
    codeinfo_t *ci = code_info(co);
    if (!ci || !ci->keep)
        return ST_PATH_NONE;
    return ci->label != ST_PATH_NONE ? ci->label : st_pylabel_resolve(ci, co);
}
