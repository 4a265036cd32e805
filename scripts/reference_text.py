"""The opening of the long prompt shared by the two reference scripts.

`llm_reference.py` and `reference_embeddings.py` each end it their own way
(the recorded fixtures hold the full texts, so neither ending may change).
"""

LONG_OPENING = (
    "Graphics processors were designed to shade pixels, but the same wide, "
    "throughput-oriented hardware turned out to suit numerical work of many "
    "kinds. Early general-purpose programs disguised matrices as textures and "
    "arithmetic as drawing; later, compute shaders and dedicated languages let "
    "programmers dispatch grids of threads directly, share small scratch "
    "memories inside a workgroup, and synchronise with barriers. A portable "
    "interface such as WebGPU exposes this model on Vulkan, Metal, Direct3D 12 "
    "and OpenGL alike: a program describes buffers, binds them to a pipeline "
    "compiled from a shader, records dispatches into a command buffer, and "
    "submits it to a queue. The hard parts are rarely the arithmetic. They are "
    "the lifetimes of buffers that the device may still be reading, the cost "
    "of each dispatch on drivers that wake a pool of threads for every one, "
    "the limits on how large a single binding may be, and the differences "
    "between shading languages once a compiler has translated them. A lazy "
    "array library hides these behind a graph: operations are recorded, not "
    "run, and evaluation turns only the part of the graph "
)
