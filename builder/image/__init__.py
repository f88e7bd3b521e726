"""Image truth: what an image really holds, read from its layers in the registry (no pull, no run, no
GPU): the GPU code of its ELF files (:mod:`builder.image.elf`, with :mod:`~builder.image.fatbin` and
:mod:`~builder.image.offload`), its installed GPU stack (:mod:`builder.image.stack`), streamed layer by
layer and cached by layer digest (:mod:`builder.image.layers`), put together by
:mod:`builder.image.inspection` (``builder inspect``).
"""
