"""Lesson 06, checkpointing and fault tolerance, as one package: a closed family that only
lesson 06, its program (jobs/resumable_train.py) and its checker use. `checkpoint` itself stays
flat: lesson 05's programs save with it too.
    preemption.py          stop cleanly when the scheduler says so: a flag, then requeue
    resumable.py           training that survives time limits, crashes and preemption, and
                           resumes bit for bit (what jobs/resumable_train.py runs)
    sharded_checkpoint.py  torch.distributed.checkpoint: every rank saves its own shard, and
                           another world size loads it
Nothing is imported here: import a name from the module that defines it.
"""
