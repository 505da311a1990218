"""trec_eval's preference measures on the examples its own documentation gives (get_prefs.c), and the files."""

from __future__ import annotations

import pytest

from retbench.errors import InputError
from retbench.io.prefs import Preference, read_prefs
from retbench.metrics.prefs import query_measures


def _lines(rows):
    return [Preference(g, s, d, float(lv)) for g, s, d, lv in rows]


def test_one_subgroup_prefers_every_higher_level_to_every_lower_one():
    # trec_eval's example: levels 3, 2, 0, 6, 0, 2 "establish a total of 13 preferences"
    rows = [("u", "1", f"d{i}", lv) for i, lv in enumerate([3, 2, 0, 6, 0, 2], 1)]
    got = query_measures(_lines(rows), [])
    assert got["prefs_num_prefs_poss"] == 13 and got["prefs_num_prefs_ful"] == 0
    # ranked d4 (6), d1 (3), d2 (2), d6 (2), d3, d5 (0): every preference holds, and is seen
    best = query_measures(_lines(rows), ["d4", "d1", "d2", "d6", "d3", "d5"])
    assert best["prefs_num_prefs_ful_ret"] == 13 and best["prefs_simp"] == 1.0 == best["prefs_pair"]
    # reversed: none holds among the retrieved
    worst = query_measures(_lines(rows), ["d5", "d3", "d6", "d2", "d1", "d4"])
    assert worst["prefs_num_prefs_ful"] == 0 and worst["prefs_simp_ret"] == 0.0


def test_several_subgroups_give_their_union_and_what_it_implies():
    # trec_eval's examples: 1>2, 1>3, 2>3 and 1>2, 4>1, 4>2 (1>2 counted once) and what they imply, 4>3: its
    # comment says 5 preferences, its transitive rule (and its binary) gives 6 ...
    union = [("u", "a", "1", 3), ("u", "a", "2", 2), ("u", "a", "3", 1), ("u", "b", "1", 2), ("u", "b", "2", 1)]
    union.append(("u", "b", "4", 3))
    assert query_measures(_lines(union), [])["prefs_num_prefs_poss"] == 6
    # ... and 1>2>3 with 2>4 gives 1>4 too: 5 preferences, no preference between 3 and 4
    implied = [("u", "a", "1", 3), ("u", "a", "2", 2), ("u", "a", "3", 1), ("u", "b", "2", 5), ("u", "b", "4", 4)]
    got = query_measures(_lines(implied), ["1", "4"])
    assert got["prefs_num_prefs_poss"] == 5 and got["prefs_num_prefs_ful_ret"] == 1  # 1 above 4, both retrieved


def test_groups_that_disagree_are_each_counted():
    # trec_eval's example: 1>2 from one group, 3>1, 4>1, 3>4, 2>1 from another: 5 preferences
    rows = [("u1", "1", "1", 3), ("u1", "1", "2", 2), ("u2", "1", "1", 0), ("u2", "1", "3", 6), ("u2", "1", "4", 2)]
    rows += [("u2", "2", "1", 0), ("u2", "2", "2", 8)]
    got = query_measures(_lines(rows), ["1", "2"])
    assert got["prefs_num_prefs_poss"] == 5
    assert got["prefs_pair_ret"] == 0.5  # the pair {1, 2}: one group each way


def test_a_group_whose_subgroups_contradict_each_other_is_refused():
    rows = [("u", "a", "1", 2), ("u", "a", "2", 1), ("u", "b", "2", 2), ("u", "b", "1", 1)]
    with pytest.raises(InputError, match="cycle"):
        query_measures(_lines(rows), [], "q")


def test_preference_files_are_read_with_comments_and_bad_lines_are_named(tmp_path):
    path = tmp_path / "prefs"
    path.write_text("# a comment\nq u s d#1 2.5\nq u s d2 0\n")
    assert read_prefs(path) == {"q": [Preference("u", "s", "d#1", 2.5), Preference("u", "s", "d2", 0.0)]}
    path.write_text("q 0 d1 1\nq 0 d2 0\n")
    assert read_prefs(path, qrels=True)["q"][0] == Preference("0", "0", "d1", 1.0)
    for text, words in [
        ("q u s d\n", "expected 5 fields"),
        ("q u s d x\n", "number"),
        ("q u s d 1\nq u s d 2\n", "twice"),
    ]:
        path.write_text(text)
        with pytest.raises(InputError, match=words):
            read_prefs(path)
