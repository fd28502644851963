"""Lesson 09, when jobs fail, as one package: a closed family that only lesson 09, its programs
(jobs/faulty_ddp.py, stacks.py, memory_peak.py, loader_memory.py) and its checker use.
    failures.py         provoke a failure for real (faulty_ddp under torchrun), bounded by
                        timeouts, and read what it left: logs, the truth, a batch script's faults
    stacks.py           every stuck rank's Python stack, taken with py-spy
    flight_recorder.py  the last collectives each rank entered: dumped, read, analysed
    memory.py           what a training step's peak holds, and two ways to lower it
    job_memory.py       host memory in a job: DataLoader workers that copy a data set, the
                        cgroup limit that kills them
    cluster_oom.py      out of memory in a Slurm job, for real: submitted, recorded, shown
    shm.py              /dev/shm and the DataLoader: the "Bus error" where it is small
Nothing is imported here: import a name from the module that defines it.
"""
