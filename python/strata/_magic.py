"""IPython's %strata and %%strata: `%load_ext strata`, then

    %strata [options] statement
    %%strata [options]
    <the cell>

profile the statement or the cell as `strata python [options] script.py` profiles a
script: the same options (-s FILE runs its file first), the same results folder
(strata-cell-output/<date_time>, or -o DIR), and in the notebook what `strata python`
prints on the terminal, then a link to the folder's HTML report (`--inline`: the
report itself, in a frame). The statement starts at the first word that is not an
option nor an option's value; options that take several values (-E, -R, --label...)
take every word up to the next option, so put `--` before the statement after them.

The code runs in the notebook's namespace, its frames the outermost as a script's are.
Calls are recorded on the thread that runs it (as %prun records them); --sample samples
every thread. Each run is a session of its own, written when the code ends (an
exception included, which is then shown as IPython shows it).
"""
import os
import shlex

from . import _strata

_TARGET = "cell"
# IPython's cells' files (<ipython-input-N-...>): kept, though strata leaves out files
# named <...> by default (STRATA_MODULE_EXCLUDE); ipykernel's are real paths
_CELLS = "^<ipython-input-"


def _words(line):
    """The shell words of `line`, each with the offset where it starts. From a word the
    shell cannot split (an unbalanced quote: Python code) on, the rest is one word."""
    lex = shlex.shlex(line, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    words = []
    pos = 0
    while True:
        while pos < len(line) and line[pos].isspace():
            pos += 1
        if pos >= len(line):
            return words
        try:
            word = lex.get_token()
        except ValueError:
            words.append((line[pos:], pos))
            return words
        if word is None:
            return words
        words.append((word, pos))
        pos = lex.instream.tell()


def _parse(line, cell):
    """(parsed options, the code's text, inline) for a magic's line and cell (None
    for the line magic), or None after --help. Raises _strata.Error for bad words."""
    words = _words(line)
    inline = [i for i, (w, _) in enumerate(words) if w == "--inline"]
    kept_at = [i for i in range(len(words)) if i not in inline]  # the parser's words
    parsed = _strata.parse_cli([words[i][0] for i in kept_at], statement=True)
    if parsed is None:
        return None
    # the statement's first word, in the line's words
    first = kept_at[parsed["start"]] if parsed["start"] < len(kept_at) else len(words)
    inline_asked = any(i < first for i in inline)
    if cell is None:
        code = line[words[first][1]:] if first < len(words) else ""
        if not code.strip():
            raise _strata.Error("no statement to profile (usage: %strata [options] statement)")
    else:
        if first < len(words):
            raise _strata.Error(f"%%strata takes options only on its line, not "
                                f"'{words[first][0]}' (the code is the cell)")
        code = cell
    return parsed, code, inline_asked


def _show(outdir, inline):
    """The link to (or the frame of) the results folder's HTML report."""
    from IPython.display import FileLink, display

    report = os.path.join(outdir, "report.html")
    if not os.path.exists(report):
        return
    if inline:
        import html
        with open(report, encoding="utf-8") as f:
            page = f.read()
        # a frame of its own: the report's styles and scripts stay out of the notebook's
        frame = (f'<iframe srcdoc="{html.escape(page, quote=True)}" '
                 'style="width:100%;height:600px;border:0"></iframe>')
        display({"text/html": frame, "text/plain": f"HTML report: {report}"}, raw=True)
        return
    try:
        shown = os.path.relpath(report)
    except ValueError:
        shown = report
    display(FileLink(shown if not shown.startswith("..") else report,
                     result_html_prefix="HTML report: "))


def _error(text):
    import sys
    sys.stderr.write(f"strata: error: {text}\n")


def run(shell, line, cell=None):
    """Profiles the line's statement, or the cell, in shell's namespace."""
    state = _strata.state()
    if state["live"] and not state["finalized"]:
        return _error("strata is already profiling this process (the kernel runs under "
                      "strata python, or a strata.profile block began a session)")
    try:
        got = _parse(line, cell)
    except _strata.Error as e:
        return _error(e)
    if got is None:
        return  # --help was printed
    parsed, text, inline = got
    source = shell.transform_cell(text)
    filename = shell.compile.cache(source)
    try:
        code = compile(source, filename, "exec")
    except SyntaxError:
        shell.showsyntaxerror(filename)
        return
    setup = None
    if parsed["setup"]:
        try:
            with open(parsed["setup"], "rb") as f:
                setup = compile(f.read(), parsed["setup"], "exec")
        except (OSError, SyntaxError, ValueError) as e:
            return _error(f"cannot read setup file '{parsed['setup']}': {e}")
    formats = _strata.get("output_formats")
    if "html" not in formats:
        _strata.set("output_formats", formats + ["html"])
    _strata.set("builtin", True)
    include = _strata.get("module_include")
    if _CELLS not in include:
        _strata.set("module_include", include + [_CELLS])
    namespace = shell.user_ns
    try:
        _strata.begin(_TARGET, ["%%strata" if cell is not None else "%strata"] +
                      [w for w, _ in _words(line)])
        if setup is not None:
            exec(setup, {"__name__": "__strata_setup__", "__file__": parsed["setup"]})
        _strata.start()
    except _strata.Error as e:
        return _error(e)
    error = None
    _strata.scope_enter()
    try:
        _strata.run_main(code, namespace)
    except BaseException as e:
        error = e
    finally:
        _strata.scope_exit()
        printed = _strata.finalize(capture=True)
    if printed:
        print(printed, end="")
    _show(_strata.state()["outdir"], inline)
    if error is not None:
        # as IPython shows a cell's exception: from the cell's frame on
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        shell.showtraceback((type(error), error, tb or error.__traceback__))


def load(ip):
    """Registers %strata and %%strata with IPython shell `ip`."""
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    from . import profiler

    profiler.sessions_by_magic = True

    @magics_class
    class StrataMagics(Magics):
        @line_cell_magic
        def strata(self, line, cell=None):
            """Profile a statement (%strata [options] statement) or a cell (%%strata
            [options]) as `strata python [options] script.py` does; %strata --help
            lists the options."""
            run(self.shell, line, cell)

    ip.register_magics(StrataMagics)
