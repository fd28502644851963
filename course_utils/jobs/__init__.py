"""Programs a launcher starts: `python -m course_utils.jobs.NAME`, under srun or torchrun.

    train_cifar       lesson 02's training script: one device       slurm/cpu_job.sh, gpu_job.sh
    single_process    the smallest training program (lesson 05's starting point)
    ddp_minimal       the same, data-parallel: lesson 05's diff
    ddp_exercise      runs a learner's train_ddp under torchrun (exercise 05.1's check)
    ddp_train         the same with DistributedDataParallel         slurm/ddp_srun.sh, ...
    fsdp_demo         FSDP2 `fully_shard` on 2 ranks (lesson 05)
    lightning_train   the same training with Lightning (lesson 05)
    resumable_train   checkpoint, preempt, requeue, resume (06)     slurm/checkpoint_requeue.sh
    gpu_demos         CUDA demonstrations that need a fresh process (lesson 03)
    cpp_demo          export, compile and run in C++ on a node (07) slurm/cpp_job.sh
    reference_gpu     record the GPU references lessons 03 and 04 show   slurm/reference_gpu.sh
    your_program      start YOUR program as the slurm scripts do: rank variables, data stand-in
    faulty_ddp        a training loop that fails on purpose, one way at a time (09)
    stacks            py-spy every rank of a Slurm job on this node (09)  slurm/stacks.sh
    memory_peak       peak memory of a step: big batch, accumulation, checkpointing (09)
    loader_memory     DataLoader workers that each copy a file, or share it (09) slurm/loader_oom.sh
Each program's options are in its `parse_args`; it imports lesson helpers, never the other way.
"""
