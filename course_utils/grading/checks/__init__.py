"""Checkers of the graded exercises, one module per lesson, with their references beside them.

Importing a module registers its checkers with `course_utils.grading.exercise`; the grader reads
their declarations without importing them (grading/catalog.py). Never shown inside a graded run.
    lesson00.py             setup and environment
    lesson00_script.py      00.1's rules for a batch script, as sbatch and bash read it
    lesson01.py             tensors
    lesson02.py             from CPU to GPU and CPU parallelism
    lesson03.py             asynchronous execution, streams and memory
    lesson03_references.py  the judge's own runs of what lesson 03's answers ran
    lesson04.py             TF32 and mixed precision
    lesson05.py             distributed data parallel
    lesson06.py             checkpointing and fault tolerance
    lesson06_resume.py      06.4: survive a signal and resume exactly, the program run for real
    lesson07.py             deploying to C++
    lesson08.py             making training fast
    lesson09.py             when jobs fail
    lesson09_references.py  the judge's own runs and readings, and the course's recorded runs
    lesson10.py             the cluster lab, graded on the learner's own jobs and runs
    lesson10_cases.py       the cases lesson 10's checks bring beside the learner's runs
    lesson10_jobs.py        10.1's and 10.2's jobs on Slurm's record, 10.4's data from it
    slurm_record.py         a learner's job as evidence: Slurm's record, held to the course
    answer_job_records.py   02.2's and 08.3's jobs (a learner's function run by the course's
                            program) as Slurm recorded them
    traces.py               Chrome traces as the judge reads them (03.4 and 04.3)
"""
