"""grader/shards: shares of about equal time for the tasks of a job array."""

import pytest

from course_utils.grading.grader.shards import lesson_costs, shard, task_count


def test_every_item_lands_in_exactly_one_share_in_its_order():
    items = list(range(10))
    shares = shard(items, 3)
    assert sorted(x for s in shares for x in s) == items
    assert [len(s) for s in shares] == [4, 3, 3]
    assert all(s == sorted(s) for s in shares)
    assert shard(items, 3) == shares  # the same split every time


def test_shares_balance_expected_time_not_count():
    # two slow notebooks (60 s: lesson 07's C++ build) and eight fast ones (5 s)
    items = [("07", i) for i in range(2)] + [("01", i) for i in range(8)]
    shares = shard(items, 2, cost=lambda item: 60.0 if item[0] == "07" else 5.0)
    loads = [sum(60 if x[0] == "07" else 5 for x in s) for s in shares]
    assert loads == [80, 80]
    assert [sum(x[0] == "07" for x in s) for s in shares] == [1, 1]


def test_more_tasks_than_items_leave_empty_shares_and_zero_tasks_is_refused():
    assert shard(["a"], 2) == [["a"], []]
    with pytest.raises(ValueError, match="0 tasks: a job array needs at least 1 task"):
        shard(["a"], 0)


@pytest.mark.parametrize(
    "submissions, asked, tasks",
    [(12, 3, 3), (2, 8, 2), (100, None, 4), (1, None, 1), (2000, None, 63), (31, None, 1)],
)
def test_task_count(submissions, asked, tasks):
    assert task_count(submissions, asked) == tasks


def test_task_count_refuses_no_tasks():
    with pytest.raises(ValueError, match="--tasks 0: give at least 1 task"):
        task_count(5, 0)


def test_lesson_costs_are_the_mean_of_earlier_seconds():
    assert lesson_costs({"01": [4.0, 6.0], "07": [60.0], "09": []}) == {"01": 5.0, "07": 60.0}
