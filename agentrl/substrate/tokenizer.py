"""Word-level tokenizer: one id per word of the gym (code, tool syntax, observations, special tokens)."""
from agentrl.substrate.gym import vocabulary_words


class Tokenizer:
    """Maps words <-> ids; an unknown word or id raises ValueError (nothing is silently replaced)."""

    def __init__(self, words):
        if len(set(words)) != len(words):
            raise ValueError('the vocabulary has repeated words')
        if '<pad>' not in words:
            raise ValueError("the vocabulary needs a '<pad>' word")
        self.words = list(words)
        self.ids = {word: i for i, word in enumerate(self.words)}
        self.pad_id = self.ids['<pad>']

    def __len__(self):
        return len(self.words)

    def encode(self, text):
        """Words (a string split on whitespace, or a list of words) -> list of ids."""
        words = text.split() if isinstance(text, str) else text
        try:
            return [self.ids[word] for word in words]
        except KeyError as error:
            raise ValueError(f'unknown word {error.args[0]!r}: not in the {len(self)}-word vocabulary') from None

    def decode(self, ids):
        """Ids (a list or 1-D tensor) -> the words joined by single spaces."""
        ids = ids.tolist() if hasattr(ids, 'tolist') else ids
        if any(not 0 <= i < len(self.words) for i in ids):
            raise ValueError(f'ids must lie in [0, {len(self.words)}), got {ids}')
        return ' '.join(self.words[i] for i in ids)


def build_tokenizer(tasks):
    """The word-level tokenizer for episodes on these tasks (the book's has 316 words; ours has 260 for make_tasks('all'))."""
    return Tokenizer(vocabulary_words(tasks))
