"""course_utils: the tested helpers of the course "PyTorch on HPC clusters".

README.md's "Map of the course" lists, per lesson, its helpers, programs, Slurm scripts and
tests; docs/conventions.md says what goes where. Lesson helpers that notebooks import, flat:
    device.py             which device a process computes on, and which backend its job uses
    hpc.py                what the scheduler gave this job; PyTorch's threads and malloc fitted
    data.py               CIFAR-10 from a data folder, or the synthetic stand-in; loaders
    synthetic.py          the synthetic CIFAR-10 stand-in, in memory and on disk
    models.py             the lesson models: the cluster documentation's CNN and its variants
    train.py              training and evaluation loops that report images per second
    timing.py             timing done right: warm-up, synchronization, median and spread
    monitor.py            utilization logged in the background while training runs
    cpu_sweep.py          CPU parallelism on an allocation: the counts a sweep measures
    paired.py             two timings compared: paired measurements decided by an interval
    inter_op.py           inter-op parallelism: two independent pieces of work at once
    tables.py             plain-text tables for terminals and notebooks
    reference.py          results measured on a GPU, and how lessons show them where there is none
    profiling.py          where the time goes: torch.profiler made quiet and readable
    nvidia.py             what a node's NVIDIA GPUs say about themselves
    precision.py          TF32 and fp32 precision: TF32 rounding emulated, the precision flags
    distributed.py        process groups, rank 0, printing from ranks
    ranks.py              who am I in a job: ranks from torchrun or Slurm (torch-free)
    launching.py          starting the ranks of a job on this machine, every way the course does
    rank_logs.py          what the ranks of a launch printed: the failing rank's own words
    ddp_jobs.py           lesson 05's jobs: what a multi-node DDP job asks for
    job_config.py         the options the course's programs share: a typed, documented config
    environment.py        integers from the environment, with errors that name the variable
    batch.py              batch jobs from a notebook: to Slurm where it answers, else here
    sbatch.py             a batch script's #SBATCH header, read as Slurm does
    accounting.py         Slurm's accounting record of a job, and seff's efficiencies
    notebook_code.py      a function defined in a notebook cell, run as a module of its own
    answer_jobs.py        a learner's function as a Slurm job they submit (02.2, 08.3)
    checkpoint.py         complete, atomic, safe checkpoints
    lightning_helpers.py  the lesson CNN as a LightningModule, and Lightning's checkpoints
    export.py             a trained model to a file a C++ program loads
    cpp.py                the C++ programs: built with CMake against LibTorch, run, fed tensors
    ccache.py             the compiler cache the C++ builds go through, where ccache is installed
    speed.py              making training fast, one measured step at a time
    throughput.py         a training recipe and its images per second
    how_many.py           how many GPUs to ask for: the deadline and the efficiency together
    import_cost.py        what a job pays to import PyTorch before it computes
    kernel_spec.py        the course environment as a Jupyter kernel on a centre's hub
    containers.py         the course's container image run by Charliecloud or Apptainer
A family that one lesson uses alone, as a package:
    doctor/               `course doctor`, the environment report (lesson 00)
    async_gpu/            a simulated asynchronous GPU, recorded streams, the allocator (03)
    fault_tolerance/      preemption, resumable training, sharded checkpoints (06)
    failing/              failures provoked and read, stacks, flight records, memory (09)
    lab/                  the cluster lab (10)
What every part shares:
    paths.py              where the course's files are: one definition
    files.py              writing files so that a crash never leaves half of one
    processes.py          child processes, the one way: a session, a time limit, none left
    messages.py           messages on a local socket: a line of JSON, then its bytes
    witness.py            what a course program reports to whoever grades the run
    reference/            the recorded results the lessons show (data, no code)
The rest:
    jobs/                 programs a launcher starts: python -m course_utils.jobs.NAME
    grading/              exercises, checkers, the judge, the runner and the grader
    tooling/              the course's other tooling: release, authoring, the GPU report, the site
    cli.py                the `course` command
"""

import logging

__version__ = "0.1.0"
# torch.utils.cpp_extension logs "No CUDA runtime is found" on a CPU machine with the CUDA wheel
# (when torch.utils.benchmark, torch.compile or AOTInductor load it): it says nothing about what
# the course is doing there, and learners take it for an error.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
# The PyTorch release the course is tested with (requirements.txt pins it; a test keeps them
# equal). Others from 2.6 on are supported; `course doctor` says when this one is not in use.
TESTED_TORCH = "2.14.1"
