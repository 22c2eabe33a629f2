"""Chapter 10's runs as a reader meets them: which plug-ins a setting uses, one run trained in the notebook with a
curve redrawn while it learns, and every run of a comparison made ready (loaded or trained) with a line per setting.

Nothing here decides a run's numbers: a watched run is trained by experiments.train_and_evaluate with LiveCurve
among its `watch` plug-ins, and LiveCurve only reads the records the engine hands it (a test checks the run is the
stored one, bit for bit). This module is not one of the fingerprinted training modules, so editing it retrains nothing.
"""
import re

from agentrl import plotting
from agentrl.ch10 import experiments
from agentrl.ch10.regularizers import chapter_plugins
from agentrl.progress import beat, where_shown
from agentrl.substrate.grpo import Plugin, engine_plugins

HOOKS = ('begin', 'shape_rewards', 'before_update', 'prepare', 'begin_minibatch', 'reshape_surrogate', 'extend_loss',
         'after_update', 'end_step')  # the engine's hooks, in the order it calls them on a step (begin: once, before
#   step 0)


# --- which plug-ins a setting uses ------------------------------------------------------------------------------

def hooks_of(plugin):
    """The hooks a plug-in overrides, in the engine's order."""
    return [hook for hook in HOOKS if getattr(type(plugin), hook) is not getattr(Plugin, hook)]


def plugins_of(spec):
    """The plug-ins the engine runs for a RunSpec, as experiments trains it: the chapter's regularisers, the KL term
    train_rl adds by itself when no plug-in is the run's KL, and the spec's measurement probes."""
    cfg = spec.config()
    chosen = chapter_plugins(cfg, spec.entropy_coef, spec.kl_in_reward, None, spec.kl_target, spec.loss_options())
    probes = [experiments.Probe(spec.probes, None, None, None, cfg.temperature)] if spec.probes else []
    return engine_plugins(cfg, chosen + probes)  # the engine's own rule, so the display cannot drift from it


def _settings(plugin):
    """The coefficients a plug-in was built with, as short text ('' if none is known)."""
    parts = []
    if hasattr(plugin, 'coef'):
        parts.append(f'coef {plugin.coef}')
    if hasattr(plugin, 'kind'):
        parts.append(f'estimator {plugin.kind}')
    if hasattr(plugin, 'target'):
        parts.append(f'target {plugin.target}')
    if hasattr(plugin, 'variant'):
        parts.append(plugin.variant)
    return ', '.join(parts)


def plugin_lines(specs, width=110):
    """One block of lines per setting: each plug-in, its coefficients and the hooks it fills; settings that only
    change an RLConfig field say which. No line is wider than `width`."""
    lines = []
    label_width = max(len(spec.name) for spec in specs) + 2
    for spec in specs:
        changed = {name: value for name, value in spec.fields if name not in ('kl_coef', 'kl_kind')}
        entries = [f'{type(p).__name__} ({_settings(p)}) -> hooks: {", ".join(hooks_of(p))}'
                   if _settings(p) else f'{type(p).__name__} -> hooks: {", ".join(hooks_of(p))}'
                   for p in plugins_of(spec)]
        entries += [f'no plug-in; RLConfig.{name} = {value!r}' for name, value in changed.items()]
        if not entries:
            entries = ["no plug-in: the engine's clipped surrogate alone"]
        for i, entry in enumerate(entries):
            line = f'{spec.name if i == 0 else "":<{label_width}}{entry}'
            if len(line) > width:
                raise ValueError(f'plug-in line wider than {width} characters: {line!r}')
            lines.append(line)
    return lines


# --- one run trained here, with a live curve --------------------------------------------------------------------

class LiveCurve(Plugin):
    """A plug-in that redraws per-step curves in a notebook while a person watches the run learn.

    end_step(record) copies the values of `keys` out of the step's record (it never writes to the record, the model
    or any random stream, so the run is the same with or without it) and, when the curves are shown in a Jupyter
    notebook (agentrl.progress.where_shown() == 'notebook'), redraws the figure in place through a display handle.
    Under the notebook runner (AGENTRL_PROGRESS=0), in CI or in a terminal it only collects the values: saved
    notebooks hold no half-drawn frames. `figure()` draws the curves as they stand.
    """

    def __init__(self, keys=(('entropy', 'policy-token entropy (nats)'), ('reward', 'training batch reward')),
                 title='', steps=None):
        self.keys, self.title, self.steps = tuple(keys), title, steps
        self.values = {key: [] for key, _ in self.keys}
        self.handle = None

    def begin(self, model, cfg):
        if where_shown() == 'notebook':
            from IPython.display import display
            self.handle = display({'text/plain': f'{self.title}: waiting for the first step'}, raw=True,
                                  display_id=True)

    def end_step(self, record):
        for key, _ in self.keys:
            self.values[key].append(float(record[key]))
        if self.handle is not None:
            self.handle.update(self._frame(), raw=True)

    def finish(self):
        """Clear the live frame (a notebook then shows the final figure once, drawn with plotting.show)."""
        if self.handle is not None:
            self.handle.update({'text/plain': ''}, raw=True)
            self.handle = None

    def figure(self):
        """The curves so far: one panel per key against the GRPO step -> matplotlib figure."""
        fig, axes = plotting.new_figure(ncols=len(self.keys), width=3.6, height=2.5)
        for ax, (key, label) in zip(axes[0], self.keys):
            values = self.values[key]
            ax.plot(range(len(values)), values, color=plotting.COLORS['none'], linewidth=1.8)
            ax.set_xlabel('GRPO step')
            ax.set_ylabel(label)
            if self.steps:
                ax.set_xlim(0, self.steps - 1)
        if self.title:
            fig.suptitle(self.title, fontsize=9)
        return fig

    def _frame(self):
        """The current figure as a PNG display bundle (drawn once, then closed)."""
        import base64

        import matplotlib.pyplot as plt
        fig = self.figure()
        png = plotting.png_bytes(fig)
        plt.close(fig)
        done = len(next(iter(self.values.values())))
        return {'image/png': base64.b64encode(png).decode('ascii'),
                'text/plain': f'{self.title}: {done} of {self.steps or "?"} steps'}


def same_run(a, b):
    """True when two runs have the same history, held-out metrics and final weights, bit for bit."""
    import torch
    return (a['history'] == b['history'] and a['metrics'] == b['metrics']
            and a['state_dict'].keys() == b['state_dict'].keys()
            and all(torch.equal(a['state_dict'][key], b['state_dict'][key]) for key in a['state_dict']))


def spec_table(cls):
    """Markdown: one row per field of a dataclass whose fields carry '#' comments (continued on '#   ' lines), read
    from its source: the field, its declaration, and the comment."""
    import inspect

    rows, body = [], inspect.getsource(cls).split('\n    def ')[0].splitlines()
    for line in body:
        text = line.strip()
        if text.startswith('#') and rows:  # a continued comment
            rows[-1][2] = (rows[-1][2] + ' ' + text.lstrip('#').strip()).strip()
        elif re.match(r'[a-z_]+: ', text):  # a field: 'name: type = default  # comment'
            declaration, _, comment = text.partition('  #')
            name, kind = declaration.split(':', 1)
            rows.append([name.strip(), kind.strip(), comment.strip()])
    lines = ['| field | declared as | what it is |', '|---|---|---|']
    return '\n'.join(lines + [f'| `{name}` | `{kind}` | {comment} |' for name, kind, comment in rows])


def identity_sentence(identical, name, steps):
    """What the watched run's comparison with the stored run found, as a sentence."""
    if identical:
        return (f"The run trained above with the live curve plugged in is the stored `{name}` run bit for bit: the "
                f"same {steps} step records, held-out scores and final weights. The plug-in changed nothing.")
    return (f"The run trained above with the live curve plugged in differs from the stored `{name}` run. Either a "
            "plug-in changed the run or the stored run was produced differently: the comparisons use the stored runs.")


# --- every run of a comparison: loaded from the run cache or trained, one line per setting ------------------------

def status_line(name, seconds):
    """'name: loaded from the run cache' (seconds None) or 'name: trained in 12 s'."""
    return f'{name}: loaded from the run cache' if seconds is None else f'{name}: trained in {seconds:.0f} s'


class _StatusBoard:
    """The per-setting lines as a Markdown display: redrawn as runs finish when a person watches in a notebook,
    shown once at the end otherwise; in a saved notebook (nobody watching: make, CI) one line that does not depend
    on the run cache. show=False displays nothing."""

    def __init__(self, names, trained, show):
        self.names, self.trained, self.show = names, trained, show
        self.seconds = {}
        self.handle = None
        if show and trained and where_shown() == 'notebook':
            from IPython.display import Markdown, display
            self.handle = display(Markdown(self.text()), display_id=True)

    def lines(self):
        return [status_line(name, self.seconds.get(name)) if name not in self.trained or name in self.seconds
                else f'{name}: training…' for name in self.names]

    def text(self):
        return '\n'.join(f'- {line}' for line in self.lines())

    def done(self, name, seconds):
        self.seconds[name] = seconds
        if self.handle is not None:
            from IPython.display import Markdown
            self.handle.update(Markdown(self.text()))

    def finish(self):
        if not self.show:
            return
        from IPython.display import Markdown, display
        if self.handle is None and where_shown() is None:  # a saved notebook (make, CI): the same text on every
            # machine, whatever its run cache held
            display(Markdown(f'{len(self.names)} settings ready, each loaded from the run cache or trained where it '
                             'was missing (run the cell yourself to see which, and how long each took).'))
            return
        if self.handle is not None:
            self.handle.update(Markdown(self.text()))
        elif not self.trained and len(self.names) > 1:  # nothing trained: one line, not one per setting
            display(Markdown(f'All {len(self.names)} runs loaded from the run cache.'))
        else:
            display(Markdown(self.text()))


def _telling(specs, then=lambda name, seconds: None):
    """A done(name, seconds) callback for experiments.train_runs: tells the notebook runner, if one watches, which run
    file was trained (agentrl.progress.beat; it counts them under make, where no line is shown), then calls `then`."""
    files = {spec.name: experiments.run_path(spec).name for spec in specs}

    def done(name, seconds):
        beat(run=files[name], seconds=seconds)
        then(name, seconds)
    return done


def ready_runs(specs, processes=2, show=True, executor=None):
    """Every spec's run, as experiments.run_all gives them, and one line per setting saying whether its run was
    loaded from the run cache or trained now (and in how many seconds, in a worker when processes > 1 or an executor
    is used) -> ({name: run}, [line per setting]).

    executor: any concurrent.futures.Executor to train the missing runs through (None: the Dask cluster at
    $AGENTRL_DASK_SCHEDULER if set, else `processes` local worker processes). The lines are shown as a Markdown
    display (redrawn as runs finish when someone watches a notebook), not printed: whether a run was trained depends
    on the machine's run cache, not on the notebook, so they are not part of the notebook's printed output. The
    notebook runner learns of each run loaded or trained through its heartbeat file, and counts them in its summary.
    show=False displays nothing.
    """
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f'run names must be unique, got {names}')
    inits = sorted({spec.init for spec in specs if spec.init is not None and experiments.load_run(spec.init) is None},
                   key=lambda s: s.name)
    experiments.train_runs(inits, processes, executor, _telling(inits))  # runs that others start from: trained first
    todo = [spec for spec in specs if experiments.load_run(spec) is None]
    missing = {spec.name for spec in todo}
    for spec in specs:
        if spec.name not in missing:
            beat(run=experiments.run_path(spec).name, seconds=None)
    board = _StatusBoard(names, missing, show)
    experiments.train_runs(todo, processes, executor, _telling(todo, board.done))
    runs = {spec.name: experiments.ensure_run(spec) for spec in specs}  # all saved now: loaded
    board.finish()
    return runs, board.lines()


def run_all(specs, processes=2, executor=None):
    """experiments.run_all's {name: run} (trained through `executor`, as ready_runs does), and, while a person
    watches the notebook, one line per setting redrawn as its run is loaded or trained ('training…', 'trained in
    12 s', 'loaded from the run cache'). A saved notebook (make, CI) shows nothing, so its outputs do not depend on
    the run cache."""
    runs, _ = ready_runs(specs, processes=processes, show=where_shown() == 'notebook', executor=executor)
    return runs
