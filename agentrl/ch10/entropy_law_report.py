"""The entropy-performance law judged on probed runs, as notebook 09 prints, records and words it.

`report` takes the probes' (entropy, pass@1) points per seed and returns everything the notebook shows; the judgement
itself is agentrl.ch10.entropy_law's, by the rule fixed before the runs.
"""
from agentrl import prose
from agentrl.ch10 import entropy_law


def fit_r2(points):
    """R^2 of the law fitted to the points themselves."""
    a, b = entropy_law.fit_law(points)
    return entropy_law.r_squared(points, lambda h: entropy_law.law(a, b, h))


def _seed_list(chosen):
    return ('seed ' if len(chosen) == 1 else 'seeds ') + prose.and_join(map(str, chosen)) if chosen else 'no seed'


def report(law_points, probe_steps, attempts, seed):
    """-> dict(verdict, printed lines, fit and judgement records, Markdown text) for the law on law_points
    ({seed: [(entropy, pass@1) per probe]}, probes at probe_steps, `attempts` held-out attempts per probe); `seed`
    is the seed whose fit is printed."""
    probe_seeds = list(law_points)
    judged = {s: entropy_law.judge(law_points[s]) for s in probe_seeds}
    law_verdict = entropy_law.verdict(list(judged.values()))
    first, late = judged[probe_seeds[0]]['first_half'], judged[probe_seeds[0]]['late']
    r2_all = {s: fit_r2(law_points[s]) for s in probe_seeds}
    r2_later = {s: fit_r2(law_points[s][2:]) for s in probe_seeds}  # without the first two probes
    noise = {s: entropy_law.probe_noise([r for _, r in law_points[s][first:]], attempts) for s in probe_seeds}
    wins = {w: [s for s in probe_seeds if judged[s]['law_beats_baselines'][w]] for w in entropy_law.WINDOWS}

    def yes_no(s):
        return ', '.join('yes' if judged[s]['law_beats_baselines'][w] else 'no' for w in entropy_law.WINDOWS)

    short = {'second half': 'half', 'late': 'late'}
    printed = [
        f'held-out pass@1 ({attempts} attempts) and policy-token entropy at steps {probe_steps[0]}, {probe_steps[1]}, ...,'
        f' {probe_steps[-1]} of unregularised runs',
        f'forecasts fitted on steps {probe_steps[0]}-{probe_steps[first - 1]}; RMSE over the second half (steps'
        f' {probe_steps[first]}-{probe_steps[-1]}) and its late part (steps {probe_steps[-late]}-{probe_steps[-1]})',
        f'law: R = -a e^H + b | last: the step-{probe_steps[first - 1]} value carried forward | line: R straight in H',
        'law wins: the law\'s RMSE is below both others (over the half, over the late part)',
        f'seed | R^2 all | R^2 from step {probe_steps[2]:<2} | '
        + ' | '.join(f'{short[w]}: ' + ' '.join(p.ljust(6) for p in ('law', 'last', 'line')) for w in entropy_law.WINDOWS)
        + ' | law wins']
    for s in probe_seeds:
        scores = judged[s]['rmse']
        cells = ' | '.join(f'{short[w]}: ' + ' '.join(f'{scores[w][p]:.4f}' for p in entropy_law.PREDICTORS)
                           for w in entropy_law.WINDOWS)
        printed.append(f'{s:>4} | {r2_all[s]:7.3f} | {r2_later[s]:16.3f} | {cells} | {yes_no(s)}')
    a, b = entropy_law.fit_law(law_points[seed])
    printed += [f'seed {seed}, law fitted on all points: a {a:.4f} b {b:.4f}, predicted ceiling b - a {b - a:.3f}',
                f'sampling noise of one probe (binomial bound over the second half): at most '
                f'{min(noise.values()):.3f}-{max(noise.values()):.3f}',
                f'the law beats both forecasts over the second half on {len(wins["second half"])} of'
                f' {len(probe_seeds)} seeds,'
                f' over the late part on {len(wins["late"])} of {len(probe_seeds)}',
                f'verdict by the rule fixed in advance: {law_verdict}']

    points = law_points[seed]  # the seed-`seed` summary the earlier version of this notebook recorded
    a1, b1 = judged[seed]['law']['a'], judged[seed]['law']['b']
    fit_record = (dict(
        seed=seed, points=len(points), a=a, b=b, r2=r2_all[seed],
        rmse=entropy_law.rmse(points, lambda h: entropy_law.law(a, b, h)), first_half=first, a_first_half=a1,
        b_first_half=b1, rmse_predicting=judged[seed]['rmse']['second half']['law']))
    judgement_record = (dict(
        rule='law beats both forecasts (last value, line in H) in RMSE over the second half and over its late quarter'
             ' on a majority of seeds: supported; in one window only: mixed; else not supported',
        seeds=probe_seeds, probe_steps=probe_steps, attempts=attempts, verdict=law_verdict,
        runs=[dict(seed=s, points=[list(p) for p in law_points[s]], r2_all=r2_all[s], r2_from_third_probe=r2_later[s],
                   probe_noise=noise[s], **judged[s]) for s in probe_seeds]))

    spans = [max(r for _, r in law_points[s][first:]) - min(r for _, r in law_points[s][first:]) for s in probe_seeds]
    best_baseline = {s: min(entropy_law.PREDICTORS[1:], key=lambda p: judged[s]['rmse']['second half'][p])
                     for s in probe_seeds}
    worded = {entropy_law.SUPPORTED: 'supported', entropy_law.MIXED: 'only partly supported (mixed)',
              entropy_law.NOT_SUPPORTED: 'not supported'}[law_verdict]
    lost = [s for s in probe_seeds if s not in wins['second half']]
    text = [f'**By the rule fixed in advance, the law is {worded} on TinyAgent.** Fitted on steps {probe_steps[0]}–'
            f'{probe_steps[first - 1]}, it forecasts the second half better than both simple forecasts on '
            f'{len(wins["second half"])} of {len(probe_seeds)} seeds ({_seed_list(wins["second half"])}) and the late steps '
            f'on {len(wins["late"])} of {len(probe_seeds)} ({_seed_list(wins["late"])}).'
            + (' Where it loses over the second half, the better forecast is '
               + prose.and_join(f'the {p} (seed{"s" if sum(best_baseline[s] == p for s in lost) > 1 else ""} '
                        + prose.and_join(str(s) for s in lost if best_baseline[s] == p) + ')'
                        for p in dict.fromkeys(best_baseline[s] for s in lost)) + '.' if lost else ''),
            f'The law fits all {len(law_points[seed])} points of a run with $R^2$ {min(r2_all.values()):.3f}–'
            f'{max(r2_all.values()):.3f}; fitted from step {probe_steps[2]} on, without the first two probes where the RL '
            f'base starts low, $R^2$ is {min(r2_later.values()):.3f}–{max(r2_later.values()):.3f}. Over the second half '
            f'pass@1 spans {min(spans):.3f}–{max(spans):.3f} per seed, against a sampling noise of one probe of at most '
            f'{max(noise.values()):.3f}'
            + (', so the forecasts are judged on differences close to the noise and a constant is hard to beat.'
               if max(spans) < 4 * max(noise.values()) else '.')]
    if law_verdict != entropy_law.SUPPORTED:
        text.append('Cui et al. report that coefficients fitted early forecast later performance in long runs of large '
                    'models. In these short runs of a small model, pass@1 is near its plateau by the middle, where the '
                    'data cannot separate a law of entropy from a plain plateau. We read the result as no evidence for the law at this scale, not as evidence '
                    'against it.')
    else:
        text.append('On this substrate the law forecasts the later probes better than the simple forecasts, as Cui et '
                    'al. report for long runs of large models; with these few probes and this noise, that is support, '
                    'not a precise confirmation.')
    return dict(verdict=law_verdict, printed=printed, fit=fit_record, judgement=judgement_record,
                text='\n\n'.join(text), judged=judged, first=first)