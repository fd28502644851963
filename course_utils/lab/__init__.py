"""Lesson 10, the cluster lab, as one package: a closed family that only lesson 10, its programs
(jobs/lab_*.py) and its checker use.
    cluster.py        where the lab's steps run (Slurm, or local ranks) and running them: the
                      staging step and the study (four shapes, the sweep) with the learner's
                      function and script (the notebook's route where no Slurm answers)
    scripts.py        the batch scripts: what their srun line starts, what a learner's lacks
    your_jobs.py      the learner's own jobs: written for them to submit (their function, their
                      script, submit_study.sh), waited for, read back from Slurm's record
    small_files.py    the lab's data set on disk: many small image files, and one archive
    staging.py        staging onto node-local disk once per node; the readings it times
    measure.py        what each rank measures: steps, threads, all-reduce, its connections
    run_records.py    the records each run writes, read back
    scaling.py        speed-up, efficiency, how many GPUs to ask for (how_many.choose), the
                      sweep's best learning rate, the jobs' efficiency from Slurm's accounting
    transport.py      the transport a job used, named from its NCCL or gloo lines
    nccl_excerpts.py  constructed NCCL_DEBUG=INFO excerpts of other transports (NCCL 2.30.7)
    energy.py         what a run used: NVML's or RAPL's counters
Nothing is imported here: import a name from the module that defines it.
"""
