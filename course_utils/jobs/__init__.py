"""Programs a launcher starts: `python -m course_utils.jobs.NAME`, under srun or torchrun.

    train_cifar.py       lesson 02's training script: one device    slurm/cpu_job.sh, gpu_job.sh
    thread_sweep.py      a learner's thread_rates on lesson 02's step (exercise 02.2's job)
    single_process.py    the smallest training program (lesson 05's starting point)
    ddp_minimal.py       the same, data-parallel: lesson 05's diff
    ddp_exercise.py      runs a learner's train_ddp under torchrun (exercise 05.1's check)
    ddp_train.py         the same with DistributedDataParallel      slurm/ddp_srun.sh, ...
    fsdp_demo.py         FSDP2 `fully_shard` on 2 ranks (lesson 05)
    lightning_train.py   the same training with Lightning (lesson 05)
    resumable_train.py   checkpoint, preempt, requeue, resume (06)  slurm/checkpoint_requeue.sh
    gpu_demos.py         CUDA demonstrations that need a fresh process (lesson 03)
    cpp_demo.py          export, compile and run in C++ on a node (07)    slurm/cpp_job.sh
    reference_gpu.py     record the GPU references lessons 03 and 04 show
                         (slurm/reference_gpu.sh)
    your_program.py      start YOUR program as the slurm scripts do: rank variables, data
                         stand-in
    faulty_ddp.py        a training loop that fails on purpose, one way at a time (09)
    stacks.py            py-spy every rank of a Slurm job on this node (09)  slurm/stacks.sh
    bottleneck_job.py    a learner's name_the_bottleneck on two profiled jobs (08.3's job)
    memory_peak.py       peak memory of a step: big batch, accumulation, checkpointing (09)
    loader_memory.py     DataLoader workers that each copy a file, or share it (09)
                         (slurm/loader_oom.sh)
    lab_train.py         stage, train, measure, record (10)  slurm/lab_scaling.sh, lab_sweep.sh
    lab_staging.py       stage once per node, time small files, an archive (10)
                         (slurm/lab_staging.sh)
    lab_stage_answer.py  runs a learner's staging function as one rank (exercise 10.1's check)
A training program's options are a typed config (`job_config`: `shared` and `option`), the
others' an argparse parser. Each imports lesson helpers, never the other way.
"""
