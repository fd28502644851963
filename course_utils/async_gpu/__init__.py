"""Lesson 03, asynchronous execution, streams and memory, as one package: a closed family that
only lesson 03 and its checker use. Two stand-ins make the GPU's behaviour visible on a CPU.
    async_model.py   a toy asynchronous GPU: kernels that take simulated time, a host clock
                     that only pays the launch, events, the log of what ran
    stream_model.py  a recording stand-in for torch.cuda's streams: the hazards between them
    allocator.py     what the caching allocator holds besides your tensors: cuBLAS's workspace
Nothing is imported here: import a name from the module that defines it.
"""
