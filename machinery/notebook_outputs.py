"""Clean an executed notebook's outputs before it is committed: what changes from run to run (papermill and
nbclient metadata, the injected cell's random id, how the kernel split printed text, warnings that depend on the
run cache) is removed, so that two runs of the same notebook write the same file."""
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from machinery.notebook_cells import INJECTED_TAG

VOLATILE_CELL_METADATA = ('papermill', 'execution', 'ExecuteTime', 'collapsed', 'scrolled')

# Warnings a training worker prints when it trains a run, and not when the run comes from the run cache: kept out of
# the committed notebook, which must not depend on what the cache held (the run itself is the same either way).
REBUILT = 'it will be recomputed'  # agentrl.verified_cache, of a stale or damaged file
CACHE_DEPENDENT_WARNINGS = ('treated no token in a minibatch',  # agentrl.ch10.regularizers.CovariancePolicyLoss
                            REBUILT)
#   The reader sees a rebuild live in the notebook and in the runner's summary line (cache_rebuilds); the committed
#   notebook never holds it, nor the machine's folder it names.


def cache_rebuilds(nb):
    """What an executed notebook's stderr says of each cached file that was unusable and is rebuilt: the warning's
    message, without the file and line Python puts before it or the source line it prints under it."""
    return [line.split('Warning: ', 1)[-1] for cell in nb.cells if cell.cell_type == 'code'
            for out in cell.get('outputs', []) if out.get('output_type') == 'stream' and out.get('name') == 'stderr'
            for line in out.get('text', '').splitlines() if REBUILT in line and not line[:1].isspace()]


# A code cell tagged so prints what this machine took (seconds, peak memory): the reader who runs the notebook sees
# it, and the committed notebook keeps the cell without its output, which no two runs would print alike.
MACHINE_TAG = 'this-machine'


def strip_volatile(nb):
    """Remove run-dependent metadata from an executed notebook, join split stream outputs, drop the cache-dependent
    warnings from stderr and the outputs of MACHINE_TAG cells, in place -> nb."""
    nb.metadata.pop('papermill', None)
    for cell in nb.cells:
        if cell.cell_type == 'code':
            machine = MACHINE_TAG in cell.metadata.get('tags', [])
            cell.outputs = [] if machine else drop_cache_dependent_warnings(coalesce_streams(cell.outputs))
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if INJECTED_TAG in cell.metadata.get('tags', []):
            cell['id'] = INJECTED_TAG  # papermill gives it a random id on every run
    return nb


def coalesce_streams(outputs):
    """Join consecutive outputs of the same stream (how the kernel splits printed text depends on timing), with
    nbconvert's CoalesceStreamsPreprocessor, which also keeps only what a carriage return leaves on a line."""
    from nbformat import v4

    cell = v4.new_code_cell(outputs=list(outputs))
    return CoalesceStreamsPreprocessor().preprocess_cell(cell, {}, 0)[0].outputs


def drop_cache_dependent_warnings(outputs):
    """Remove each CACHE_DEPENDENT_WARNINGS line of stderr, with the indented source line Python prints under it;
    a stderr output left empty is dropped. Everything else stays as it was."""
    kept = []
    for out in outputs:
        if out.output_type == 'stream' and out.name == 'stderr':
            lines, text = out.text.splitlines(keepends=True), []
            skip_source = False
            for line in lines:
                if skip_source and line.startswith('  '):
                    skip_source = False
                    continue
                skip_source = any(w in line for w in CACHE_DEPENDENT_WARNINGS)
                if not skip_source:
                    text.append(line)
            if not text:
                continue
            out.text = ''.join(text)
        kept.append(out)
    return kept
