"""Notebook 14's figure: Figure 10.1's three questions asked of SmolLM2's real pairs, with the book's toy beside."""
from agentrl.plotting import COLORS, new_figure
from agentrl.pretrained.estimator_text import book_gradient_rows, book_moment_rows


def estimator_figure(study):
    """Three panels against the per-token KL: k2's bias, each estimator's single-draw spread, and the k-gradients'
    error against the reverse-KL gradient. Filled markers: the real pairs; dashed: the book's toy distributions."""
    fig, axes = new_figure(3, width=3.6, height=3.0)
    bias, spread, error = axes[0]
    book, book_grad = book_moment_rows(), book_gradient_rows()
    kls = [p['kl_mean'] for p in study.pairs]
    book_kls = [row['kl'] for row in book]
    bias.plot(kls, [p['pooled']['k2'][0] for p in study.pairs], 'o', color=COLORS['k2'], label='k2, SmolLM2')
    bias.plot(book_kls, [row['k2'][0] for row in book], '--', color=COLORS['k2'], alpha=0.6, label='k2, book (K = 50)')
    bias.axhline(1.0, color='grey', lw=0.8)
    bias.set(xscale='log', xlabel='per-token KL', ylabel='mean / KL', title='Is the mean right?')
    for kind in ('k1', 'k2', 'k3'):
        spread.plot(kls, [p['pooled'][kind][1] for p in study.pairs], 'o', color=COLORS[kind], label=kind)
        spread.plot(book_kls, [row[kind][1] for row in book], '--', color=COLORS[kind], alpha=0.6)
    spread.set(xscale='log', yscale='log', xlabel='per-token KL', ylabel='std / KL (one draw)',
               title='Is one draw informative?')
    grad_kls = [p['gradients']['kl_mean'] for p in study.pairs]
    for kind in ('k2', 'k3', 'k3+'):
        values = [max(p['gradients'][kind]['error reverse'], 1e-5) for p in study.pairs]
        error.plot(grad_kls, values, 'o' if kind != 'k3+' else 'x', color=COLORS[kind], label=kind)
        error.plot([row['kl'] for row in book_grad], [max(row[kind], 1e-5) for row in book_grad], '--',
                   color=COLORS[kind], alpha=0.6)
    error.set(xscale='log', yscale='log', xlabel='per-token KL', ylabel='error vs reverse-KL gradient',
              title='Does the loss push the right way?')
    bias.legend(fontsize=7)
    spread.legend(fontsize=7, title='dots: SmolLM2, dashes: book', title_fontsize=7, loc='lower left')
    error.legend(fontsize=7, title='zero errors drawn at 1e-5', title_fontsize=7)
    return fig
