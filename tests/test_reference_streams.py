"""Reference streams of ``metrics.corpus_stats``: a stream given as one string (not a list of lines) is
refused, never split into one-character references (it was, silently, when it was not the first stream)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.metrics import corpus_stats

HYPOTHESES = ["the cat sat", "on the mat"]


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=6), st.integers(0, 2))
def test_a_string_stream_is_refused_wherever_it_stands(stream: str, position: int) -> None:
    streams: list = [list(HYPOTHESES), list(HYPOTHESES)]
    streams.insert(position, stream)
    with pytest.raises(InputError, match="one line per segment"):
        corpus_stats(HYPOTHESES, streams)


def test_streams_of_lines_are_accepted() -> None:
    single = corpus_stats(HYPOTHESES, HYPOTHESES)
    several = corpus_stats(HYPOTHESES, [HYPOTHESES, ["the cat sat down", "on a mat"]])
    assert (single.references, several.references) == (1, 2)
    assert single.stats.shape[0] == several.stats.shape[0] == len(HYPOTHESES)
