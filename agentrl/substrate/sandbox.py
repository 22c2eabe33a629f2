"""Running code an agent wrote: screened, in a separate worker process, under limits the code cannot lift.

Restricted builtins alone are not a sandbox: from any object, `().__class__.__base__.__subclasses__()`
reaches the interpreter's modules. So the hidden tests of an edited function run behind four guards:

1. **Screen.** Before anything runs, the syntax tree is checked: no name starting with '__', no
   attribute outside SAFE_ATTRIBUTES (plain list/dict/str methods; never `format`, `gi_frame`, dunders),
   no class patterns in `match`. Every known escape needs one of these.
2. **Worker process.** The code runs in a child Python (this file run as a script) that imports only
   the standard library, starts in an empty temporary directory with a clean environment and its own
   session, and before its first job limits itself: address space MEMORY_BYTES, no file may grow
   (RLIMIT_FSIZE 0), no new file descriptor (so no file or socket can be opened), no child process
   (started by root, it first becomes an unprivileged user: root is exempt from that limit), and CPU
   seconds per job. A crash there cannot touch the training process.
3. **Parent's clock.** The parent waits at most WALL_SECONDS for a job's reply; then it kills the worker
   (SIGKILL also stops work inside one C call, such as `a1 ** a0` with a growing exponent) and starts
   a new one for the next job. A time-out or a crash is an outcome, never a hang or an exception.
4. **Parent's verdict.** The worker only returns the text of each output; the parent reads it back as
   a Python literal and compares it with the expected value itself. Nothing the code does inside the
   worker can change a verdict except what it returns.

Inside the worker each call also has a deterministic budget of LINE_BUDGET executed lines, so code that
loops in Python fails identically on every machine; the wall clock is only a backstop for single
C-level operations that explode, which take far longer than WALL_SECONDS anywhere.
"""
import ast
import atexit
import builtins
import json
import os
import resource
import select
import subprocess
import sys
import time
import warnings

LINE_BUDGET = 2_000  # executed lines per call (correct functions of the gym need at most 121)
WALL_SECONDS = 5.0  # per job (compile and every call); correct code needs milliseconds
MEMORY_BYTES = 512 * 2 ** 20  # worker's address space
MAX_REPLY_BYTES = 2 ** 20  # a longer reply counts as a failure
UNPRIVILEGED_ID = 65534  # 'nobody' / 'nogroup': who the worker runs as when root starts it
SAFE_BUILTINS = {name: getattr(builtins, name) for name in ('len', 'range', 'min', 'max', 'abs', 'sum', 'sorted')}
SAFE_ATTRIBUTES = frozenset({
    'append', 'clear', 'copy', 'count', 'extend', 'index', 'insert', 'pop', 'remove', 'reverse', 'sort',
    'get', 'items', 'keys', 'values', 'setdefault', 'update',
    'endswith', 'find', 'isalpha', 'isdigit', 'join', 'lower', 'lstrip', 'replace', 'rstrip', 'split',
    'startswith', 'strip', 'upper'})


class LineBudgetExceeded(Exception):
    """A call executed more than LINE_BUDGET lines."""


def call_with_line_budget(function, args=()):
    """function(*args), raising LineBudgetExceeded once the code has executed LINE_BUDGET lines."""
    executed = 0

    def count_lines(frame, event, arg):
        nonlocal executed
        if event == 'line':
            executed += 1
            if executed > LINE_BUDGET:
                raise LineBudgetExceeded(f'more than {LINE_BUDGET} lines')
        return count_lines

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: count_lines)
    try:
        return function(*args)
    finally:
        sys.settrace(previous)


def screen(tree):
    """Why the syntax tree may not run (a short reason), or None if it passes the screen."""
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg is not None:
            names = [node.arg]
        elif isinstance(node, ast.alias):
            names = [node.name, node.asname or '']
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = list(node.names)
        elif isinstance(node, ast.Attribute) and node.attr not in SAFE_ATTRIBUTES:
            return f'attribute {node.attr!r} is not allowed'
        elif isinstance(node, ast.MatchClass):
            return 'class patterns are not allowed'
        for name in names:
            if name.startswith('__'):
                return f'name {name!r} is not allowed'
    return None


def grade(source, name, inputs):
    """Run `source`, then call function `name` on each input (a tuple of arguments), in this process.

    Returns dict(status='ok', outputs=[repr of each output]) or dict(status='failed', why=...), stopping
    at the first call that raises. Used by the worker; trusted code only should call it directly.
    """
    try:
        tree = ast.parse(source, '<agent>')
    except (SyntaxError, ValueError) as error:
        return dict(status='failed', why=f'does not parse: {type(error).__name__}')
    reason = screen(tree)
    if reason:
        return dict(status='failed', why=f'screened: {reason}')
    try:
        with warnings.catch_warnings():  # the agent's code may trigger SyntaxWarnings: not ours to print
            warnings.simplefilter('ignore')
            code = compile(tree, '<agent>', 'exec')
    except (SyntaxError, ValueError) as error:
        return dict(status='failed', why=f'does not compile: {type(error).__name__}')
    namespace = {'__builtins__': dict(SAFE_BUILTINS)}  # a fresh dict per job
    outputs = []
    try:
        call_with_line_budget(lambda: exec(code, namespace))
        function = namespace.get(name)
        if not callable(function):
            return dict(status='failed', why=f'no function {name!r}')
        for args in inputs:
            outputs.append(repr(call_with_line_budget(function, args)))
    except BaseException as error:  # noqa: BLE001 - SystemExit and friends included: all are failures
        return dict(status='failed', why=f'raised {type(error).__name__}')
    return dict(status='ok', outputs=outputs)


def _limit_this_process(memory_bytes):
    """The worker's own limits, set once before any job (the screened code has no way to raise them).

    The worker is started with only descriptors 0, 1 and 2 open, so a descriptor ceiling of 3 refuses
    every open() and socket(); everything the worker needs was imported before. The kernel does not apply
    the process limit to root, so a worker started by root first becomes UNPRIVILEGED_ID (user and group);
    where root may not change its identity (no CAP_SETUID, as in some containers) it stays root, and a
    fork is then not refused.
    """
    if os.getuid() == 0 or os.geteuid() == 0:
        try:
            os.setgroups([])
            os.setgid(UNPRIVILEGED_ID)
            os.setuid(UNPRIVILEGED_ID)
        except OSError:
            pass
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, 3))


def _cpu_limit_for_next_job(seconds):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (used + seconds, hard))  # SIGXCPU ends the worker past it


def _serve(memory_bytes, cpu_seconds):
    """Worker loop: one JSON job per line on stdin, one JSON reply per line on stdout, until stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _limit_this_process(memory_bytes)
    stdout.write(b'{"status": "ready"}\n')
    stdout.flush()
    parsed = {}  # input text -> value: the same hidden-test inputs come back in every job of a task
    for line in stdin:
        job = json.loads(line)
        _cpu_limit_for_next_job(cpu_seconds)
        for text in job['inputs']:
            if text not in parsed:
                parsed[text] = ast.literal_eval(text)
        inputs = [parsed[text] for text in job['inputs']]
        reply = grade(job['source'], job['name'], inputs)
        try:
            data = json.dumps(reply).encode()
        except (ValueError, TypeError):
            data = json.dumps(dict(status='failed', why='output not representable')).encode()
        stdout.write(data + b'\n')
        stdout.flush()


# ------------------------------------------------------------------------------------------- parent side

def _same_value(text, expected):
    """Whether the output written as `text` (a repr from the worker, untrusted) equals `expected`.

    Identical text is the common case and needs no parsing (a repr spells out its value; 'nan' is the one
    literal unequal to itself); otherwise the text is read back as a plain literal (never evaluated).
    """
    if text == repr(expected) and 'nan' not in text:
        return True
    try:
        return ast.literal_eval(text) == expected
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False  # not a plain value (an object, a function, inf or nan): it cannot be the answer


class Sandbox:
    """A grading worker process, started on first use and restarted after a time-out or a crash.

    run(source, name, tests) -> (status, detail), status one of 'pass', 'fail', 'timeout', 'crash'.
    """

    def __init__(self, wall_seconds=WALL_SECONDS, memory_bytes=MEMORY_BYTES):
        if not wall_seconds > 0 or not memory_bytes >= 64 * 2 ** 20:
            raise ValueError(f'wall_seconds must be > 0 and memory_bytes >= 64 MiB, got {wall_seconds}, {memory_bytes}')
        self.wall_seconds, self.memory_bytes = wall_seconds, memory_bytes
        self.process, self.owner = None, None
        self.counts = dict(timeout=0, crash=0)
        self._closes_at_exit = False

    def _start(self):
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONHASHSEED': '0', 'LC_ALL': 'C.UTF-8'}
        cpu_seconds = int(self.wall_seconds) + 2
        from agentrl.paths import PACKAGE  # parent side only: the worker runs this file with the standard library

        script = PACKAGE / 'substrate' / 'sandbox.py'
        if not self._closes_at_exit:  # the worker goes when this process ends
            atexit.register(self.close)
            self._closes_at_exit = True
        self.process = subprocess.Popen(
            [sys.executable, '-S', '-s', str(script), str(self.memory_bytes), str(cpu_seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd='/', env=env,
            start_new_session=True, close_fds=True)
        self.owner = os.getpid()
        if self._reply(deadline_seconds=60.0) != dict(status='ready'):
            self.close()
            raise RuntimeError(f'the grading worker ({sys.executable} {script}) did not start')

    def close(self):
        """Stop the worker (if any)."""
        process, self.process = self.process, None
        if process is not None and self.owner == os.getpid():
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                process.kill()
            except OSError:
                pass
            process.wait()

    def _reply(self, deadline_seconds):
        """The worker's next reply line as a dict; None on time-out; 'crash' if the worker ended or babbled."""
        deadline = time.monotonic() + deadline_seconds
        fd, data = self.process.stdout.fileno(), bytearray()
        while not data.endswith(b'\n'):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk or len(data) + len(chunk) > MAX_REPLY_BYTES:
                return 'crash'
            data += chunk
        try:
            reply = json.loads(bytes(data))
        except ValueError:
            return 'crash'
        return reply if isinstance(reply, dict) else 'crash'

    def run(self, source, name, tests):
        """Grade `source`: does function `name` return the expected value for every (args, expected) in tests?"""
        if self.process is None or self.owner != os.getpid():  # none yet, or inherited through a fork
            self.process = None
            self._start()
        job = json.dumps(dict(source=source, name=name, inputs=[repr(tuple(args)) for args, _ in tests]))
        try:
            self.process.stdin.write(job.encode() + b'\n')
            self.process.stdin.flush()
            reply = self._reply(self.wall_seconds)
        except OSError:  # the worker is gone
            reply = 'crash'
        if reply is None or reply == 'crash':
            outcome = 'timeout' if reply is None else 'crash'
            self.counts[outcome] += 1
            self.close()
            return outcome, f'the worker was stopped ({outcome})'
        if reply.get('status') != 'ok':
            return 'fail', str(reply.get('why', 'failed'))
        outputs = reply.get('outputs')
        if not isinstance(outputs, list) or len(outputs) != len(tests):
            return 'fail', 'wrong number of outputs'
        for text, (_, expected) in zip(outputs, tests):
            if not (isinstance(text, str) and _same_value(text, expected)):
                return 'fail', 'wrong output'
        return 'pass', 'every output matches'


if __name__ == '__main__':
    _serve(int(sys.argv[1]), int(sys.argv[2]))
