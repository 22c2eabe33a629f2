"""agentrl.ch10.live: the live curve only reads (a run is the same with it), it draws only for a person watching a
notebook, the plug-in listing names every setting's hooks, and a run trained here is the one the run cache holds."""
import copy

import pytest
import torch

import agentrl as arl
from agentrl.ch10 import experiments, live
from substrate_fixtures import quick_base, tokenizer


class FakeHandle:
    def __init__(self, log):
        self.log = log

    def update(self, bundle, raw):
        self.log.append(bundle)


@pytest.fixture()
def watching(monkeypatch):
    """A notebook with a person watching: where_shown() says 'notebook' and displays land in a list."""
    shown = []
    monkeypatch.setattr(live, 'where_shown', lambda: 'notebook')
    monkeypatch.setattr('IPython.display.display',
                        lambda bundle, raw=False, display_id=False, **kw: (shown.append(bundle), FakeHandle(shown))[1])
    return shown


def train(plugins=()):
    model = copy.deepcopy(quick_base())
    cfg = arl.RLConfig(eval_every=0, tasks_per_step=2)
    history = arl.train_rl(model, arl.make_tasks('train'), tokenizer(), cfg, steps=3, plugins=plugins)
    return history, model


def test_the_live_curve_redraws_in_a_notebook_and_leaves_the_run_unchanged(watching):
    plain_history, plain_model = train()
    curve = live.LiveCurve(title='test', steps=3)
    history, model = train([curve])
    assert history == plain_history
    for a, b in zip(plain_model.parameters(), model.parameters()):
        assert torch.equal(a, b)
    assert curve.values['entropy'] == [step['entropy'] for step in history]
    assert curve.values['reward'] == [step['reward'] for step in history]
    frames = [bundle for bundle in watching if 'image/png' in bundle]
    assert len(frames) == 3 and frames[-1]['text/plain'] == 'test: 3 of 3 steps'
    curve.finish()
    assert watching[-1] == {'text/plain': ''} and curve.handle is None


def test_the_live_curve_draws_nothing_under_the_runner(monkeypatch):
    monkeypatch.setenv('AGENTRL_PROGRESS', '0')
    monkeypatch.setattr('IPython.display.display', lambda *a, **k: pytest.fail('displayed under the runner'))
    curve = live.LiveCurve(steps=2)
    curve.begin(None, None)
    curve.end_step({'entropy': 0.5, 'reward': 1.0, 'step': 0})
    assert curve.handle is None and curve.values == {'entropy': [0.5], 'reward': [1.0]}
    fig = curve.figure()
    assert len(fig.axes) == 2


def test_plugin_lines_name_each_setting_and_its_hooks():
    arms = experiments.chapter_arms()
    lines = live.plugin_lines(arms)
    assert all(len(line) <= 110 for line in lines)
    by_setting = {line.split('  ')[0]: line for line in lines}
    assert set(by_setting) == {spec.name for spec in arms}
    assert ('ReferenceKL (coef 0.3, estimator k3+) -> hooks: begin, prepare, begin_minibatch, extend_loss'
            in by_setting['KL k3+ 0.3'])
    assert 'KLInReward (coef 0.3) -> hooks: begin, shape_rewards' in by_setting['KL reward 0.3']
    assert 'EntropyBonus (coef 0.1) -> hooks: prepare, extend_loss' in by_setting['entropy 0.1']
    assert 'no plug-in; RLConfig.temperature = 1.3' in by_setting['temperature 1.3']
    assert "no plug-in: the engine's clipped surrogate alone" in by_setting['none']


def test_plugins_of_lists_what_the_engine_runs():
    adaptive = experiments.arm('a', dict(kl_coef=0.3, kl_kind='k3+'), kl_target=0.1, probes=('covariance',))
    assert [type(p).__name__ for p in live.plugins_of(adaptive)] == ['ReferenceKL', 'AdaptiveKL', 'Probe']
    assert live.hooks_of(live.plugins_of(adaptive)[1]) == ['end_step']
    assert live.plugins_of(experiments.arm('none')) == []


def test_status_lines():
    assert live.status_line('KL k3+ 0.3', None) == 'KL k3+ 0.3: loaded from the run cache'
    assert live.status_line('none', 12.4) == 'none: trained in 12 s'


# --- on the full RL base: a run trained here is the run the cache holds ------------------------------------------

@pytest.mark.slow
def test_a_run_trained_here_is_the_stored_run_and_ready_runs_says_what_it_did(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_RUNS_DIR', str(tmp_path / 'runs'))
    specs = [experiments.arm('a', steps=2), experiments.arm('b', dict(kl_coef=0.3, kl_kind='k3+'), steps=2)]
    runs, lines = live.ready_runs(specs, processes=2, show=False)
    assert [line.split(': ')[1].startswith('trained in') for line in lines] == [True, True]
    again, lines = live.ready_runs(specs, processes=2, show=False)
    assert lines == ['a: loaded from the run cache', 'b: loaded from the run cache']
    for spec in specs:
        assert live.same_run(experiments.train_and_evaluate(spec, watch=[live.LiveCurve()]), runs[spec.name])
        assert live.same_run(again[spec.name], runs[spec.name])


def test_run_all_shows_its_lines_only_to_a_person_watching(monkeypatch):
    shown = []
    monkeypatch.setattr(live, 'ready_runs',
                        lambda specs, processes, show, executor: (shown.append(show), ({'a': 1}, ['a: x']))[1])
    monkeypatch.setattr(live, 'where_shown', lambda: None)  # make, CI: the saved notebook gets nothing
    assert live.run_all(['spec'], processes=1) == {'a': 1}
    monkeypatch.setattr(live, 'where_shown', lambda: 'notebook')
    assert live.run_all(['spec'], processes=1) == {'a': 1}
    assert shown == [False, True]


def test_the_spec_table_lists_every_field_of_the_run_spec_with_its_comment():
    import dataclasses

    from agentrl.ch10 import experiments, live
    table = live.spec_table(experiments.RunSpec)
    rows = table.splitlines()[2:]
    assert [row.split('`')[1] for row in rows] == [f.name for f in dataclasses.fields(experiments.RunSpec)]
    assert "empty: PPO's clipped surrogate |" in table  # a comment continued on the next source line is kept
    assert all(row.count(' | ') == 2 and not row.endswith('|  |') for row in rows)
