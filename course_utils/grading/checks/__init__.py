"""Checkers of the graded exercises, one module per lesson (lesson00.py, lesson01.py, ...).

Importing a module registers its checkers with `course_utils.grading.exercise`.
"""
