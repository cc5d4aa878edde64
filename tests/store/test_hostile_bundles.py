"""bench/hostile_bundles.py on a small scale: every named hostile bundle
is refused in one line with the store unchanged, a colliding run is kept as
stored and named, a flag the figures imply is stored, special files and a file-size limit are one
line each, fuzzed variants never leave the store unreadable."""

from fixtures import bench_scripts


def load_corpus():
    return bench_scripts.load("hostile_bundles")


def test_the_hostile_corpus_leaves_the_store_unchanged_and_readable(tmp_path):
    corpus = load_corpus()
    said = []
    counts = corpus.run_corpus(tmp_path, fuzz=15, seed=20261130, say=said.append)
    assert said == [] and counts["failures"] == 0, said
    named = len(corpus.NAMED)
    assert counts["named"] == named + 2 and counts["fuzz"] == 15
    assert counts["refused"] >= named  # every named case (the damaged files too) is refused
    assert counts["accepted_named_case"] == 0 and counts["changed_after_refusal"] == 0
    assert counts["unreadable"] == 0 and counts["not_one_line"] == 0
    assert counts["collisions_named"] == 1  # a stored id with other content
    assert counts["flags_implied"] == 1  # MFU 10^6 stored with above_peak
    # a FIFO, a /dev/zero twin (as root), a folder, a file past the size bound, a file-size limit
    assert counts["special"] == counts["special_refused"] >= 4
