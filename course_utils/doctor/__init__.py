"""`course doctor`, the environment report (lesson 00), as one package: a closed family that only
lesson 00, lesson 07's checker and the `course` command use.
    report.py     collects the rows and prints the table (`course doctor`, `--json`)
    findings.py   one row: topic, value, status, advice
    versions.py   Python, PyTorch against the pin, torchvision against PyTorch, CUDA and cuDNN
    routes.py     which lessons take another route on a PyTorch older than the pin
    gpu.py        the NVIDIA driver against the CUDA build, each GPU against the build's archs
    slurm.py      the Slurm job this process is in, and what would break a launch from here
    runtime.py    CPU threads, precision flags, distributed backends, data
    jupyter.py    the course kernel, and the widget extension of the server that started it
    container.py  the container image this runs in, its runtime, and the GPU driver inside it
Nothing is imported here: import a name from the module that defines it.
"""
