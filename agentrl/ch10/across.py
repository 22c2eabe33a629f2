"""The chapter's claims judged on several substrates: which verdicts belong to GRPO and its regularisers, and which
to the substrate they were measured on.

A substrate's verdict on a claim is notebook 09's: the claim checked on each seed's runs, then the five-seed rule
(`claims.seed_rule`). Across substrates a claim gets one label by a rule fixed before the sweep was run:

- robust: the same verdict on every substrate, and that verdict is 'holds' or 'does not hold';
- substrate-dependent: it holds on at least one substrate and does not hold on at least one other;
- seed-dependent: anything else (seed-dependent somewhere, with no substrate where it holds beside one where it
  does not).

The sweep keeps only what the claims and the readings read of each run (`run_summary`), so the verdicts can be
recomputed from the committed record without the runs themselves.
"""
import dataclasses

from agentrl.ch10 import claims, experiments, explanations

ROBUST, SUBSTRATE_DEPENDENT = 'robust', 'substrate-dependent'
UNDECIDED = 'undecided'  # tied or seed-dependent on some substrate, and nowhere holding beside failing
TIED_EVERYWHERE = 'tied'  # tied on every substrate: the noise decides nothing anywhere
HISTORY_KEYS = ('step', 'entropy', 'reward', 'reads', 'invalid', 'kl_ref', 'signal')  # what the checks read per step
METRIC_KEYS = ('pass1', 'pass8', 'distinct', 'invalid', 'kl_start')  # ... and of the held-out evaluation


def claim_specs(seed):
    """Every run the claims read on one seed, as notebook 09 trains them: the nine settings of 10.7, the two 20-step
    continuations of the KL k3+ 0.3 run that 10.8's reset claims compare, and the three re-checks at twice the
    coefficient or the steps -> {the name the claims use: RunSpec}."""
    specs = {spec.name: spec for spec in experiments.chapter_arms(seed=seed)}
    anchored = specs['KL k3+ 0.3']
    for name, reference in zip(claims.RESET_RUNS, ('rl_base', 'start')):  # keep the RL base, or reset to the start
        specs[name] = experiments.RunSpec(name, anchored.fields, steps=20, seed=seed + 1, init=anchored,
                                          reference=reference)
    specs.update((spec.name, spec) for spec in experiments.scale_arms(seed))
    return specs


def seed_specs(seeds):
    """claim_specs of every seed, each renamed '<name> | seed <s>' so that one sweep holds them all -> list."""
    return [dataclasses.replace(spec, name=f'{name} | seed {seed}')
            for seed in seeds for name, spec in claim_specs(seed).items()]


def runs_of_seed(runs, seed):
    """The runs of one seed out of a sweep's {'<name> | seed <s>': run}, under the names the claims use."""
    suffix = f' | seed {seed}'
    return {name[:-len(suffix)]: run for name, run in runs.items() if name.endswith(suffix)}


def run_summary(run, history_keys=HISTORY_KEYS, metric_keys=METRIC_KEYS):
    """The parts of a run the claims and the readings read: per-step history keys, held-out metrics, vocabulary size."""
    history = [{key: step[key] for key in history_keys if key in step} for step in run['history']]
    return dict(history=history, metrics={key: run['metrics'][key] for key in metric_keys},
                vocab_size=run['vocab_size'])


def substrate_verdicts(runs_by_seed, seeds):
    """Every claim whose runs are present, judged on one substrate -> [claims.seed_verdict dict], in CLAIMS order."""
    if len(runs_by_seed) != len(seeds):
        raise ValueError(f'runs_by_seed has {len(runs_by_seed)} entries for {len(seeds)} seeds')
    found = [claims.seed_verdict(claim, runs_by_seed, seeds) for claim in claims.CLAIMS]
    return [verdict for verdict in found if verdict is not None]


def label(verdicts):
    """The across-substrate label of one claim from its verdicts (claims.HOLDS, ...) on each substrate."""
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError('a claim needs a verdict on at least one substrate to be labelled')
    unknown = set(verdicts) - {claims.HOLDS, claims.DOES_NOT_HOLD, claims.SEED_DEPENDENT, claims.TIED}
    if unknown:
        raise ValueError(f'unknown verdicts {sorted(unknown)}; allowed: {claims.HOLDS!r}, {claims.DOES_NOT_HOLD!r}, '
                         f'{claims.SEED_DEPENDENT!r}, {claims.TIED!r}')
    if len(set(verdicts)) == 1 and verdicts[0] in (claims.HOLDS, claims.DOES_NOT_HOLD):
        return ROBUST
    if claims.HOLDS in verdicts and claims.DOES_NOT_HOLD in verdicts:
        return SUBSTRATE_DEPENDENT
    if set(verdicts) == {claims.TIED}:
        return TIED_EVERYWHERE
    return UNDECIDED


def claim_table(verdicts_by_substrate):
    """{substrate: [seed_verdict dict]} -> one row per claim judged on every substrate: key, kind, text, per
    substrate (held_on, seeds, verdict), and its label. Claims missing on some substrate are left out."""
    names = list(verdicts_by_substrate)
    by_name = {name: {v['key']: v for v in verdicts_by_substrate[name]} for name in names}
    rows = []
    for claim in claims.CLAIMS:
        if not all(claim.key in by_name[name] for name in names):
            continue
        cells = {name: dict(held_on=by_name[name][claim.key]['held_on'], seeds=len(by_name[name][claim.key]['seeds']),
                            verdict=by_name[name][claim.key]['verdict']) for name in names}
        rows.append(dict(key=claim.key, kind=claim.kind, text=claim.text, cells=cells,
                         label=label(cell['verdict'] for cell in cells.values())))
    return rows


def premise_across(key, runs_by_substrate, verdicts_by_substrate):
    """Our reading of a claim (explanations.EXPLANATIONS[key]) set against the claim on every substrate.

    runs_by_substrate: {substrate: [runs of each seed]}. A reading says the claim fails because its premise holds,
    so it predicts the premise true where the claim does not hold and false where it holds. -> dict: key, premise,
    per substrate (claim verdict, premise held per seed, premise verdict by the seed rule), and which substrates
    agree with the prediction and which contradict it (a seed-dependent or tied claim, or a seed-dependent premise,
    predicts nothing).
    """
    reading = explanations.EXPLANATIONS[key]
    cells, agree, contradict = {}, [], []
    for name, runs_by_seed in runs_by_substrate.items():
        verdict = next(v['verdict'] for v in verdicts_by_substrate[name] if v['key'] == key)
        held = [bool(ok) for ok, _ in reading.measure(runs_by_seed)]
        premise = claims.seed_rule(sum(held), len(held))
        cells[name] = dict(claim=verdict, premise_held=held, premise=premise)
        if claims.SEED_DEPENDENT in (verdict, premise) or verdict == claims.TIED:
            continue  # a claim the seeds or the noise leave open predicts nothing about its premise
        predicted = claims.DOES_NOT_HOLD if premise == claims.HOLDS else claims.HOLDS
        (agree if verdict == predicted else contradict).append(name)
    return dict(key=key, premise=reading.premise, cells=cells, agree=agree, contradict=contradict)


def premise_sentence(found, substrate_names):
    """The plain answer for premise_across's dict: does the premise hold where the claim fails and fail where it
    holds? substrate_names: {substrate: its name in prose}."""
    named = lambda keys: ', '.join(substrate_names[k] for k in keys)  # noqa: E731
    flips = {cell['claim'] for cell in found['cells'].values()} >= {claims.HOLDS, claims.DOES_NOT_HOLD}
    if found['contradict']:
        return (f'No: the reading predicts the wrong verdict on {named(found["contradict"])}'
                + (f' (and the right one on {named(found["agree"])})' if found['agree'] else '') + '.')
    if not found['agree']:
        return 'It cannot say: on every substrate the claim or the premise depends on the seed.'
    if not flips:
        return (f'The claim does not flip between holding and not holding, so this does not test the reading; where '
                f'both are settled ({named(found["agree"])}) the premise is as the reading needs.')
    return (f'Yes: on every substrate where both are settled ({named(found["agree"])}) the premise holds where the '
            'claim fails and fails where it holds.')


def cell_text(cell):
    """One substrate's cell of the claim table: seeds held, then the verdict in one letter."""
    letter = {claims.HOLDS: 'holds', claims.DOES_NOT_HOLD: 'no', claims.SEED_DEPENDENT: 'seed',
              claims.TIED: 'tied'}[cell['verdict']]
    return f'{cell["held_on"]}/{cell["seeds"]} {letter}'


def claim_table_markdown(rows, headers):
    """The claim table as Markdown: one row per claim, one column per substrate (headers: {substrate: heading}),
    then its label."""
    names = list(headers)
    lines = ['| claim | kind | ' + ' | '.join(headers[n] for n in names) + ' | across substrates |',
             '|---|---|' + '---|' * len(names) + '---|']
    for row in rows:
        lines.append(f'| {row["text"]} | {row["kind"]} | ' + ' | '.join(cell_text(row['cells'][n]) for n in names)
                     + f' | **{row["label"]}** |')
    return '\n'.join(lines)
