"""Builds of rendered variants: the plan (:mod:`~builder.build.plan`, pure), the registry tag steps
(:mod:`~builder.build.tags`: content tags write-once, variant tags moving), execution
(:mod:`~builder.build.run`: every variant, in parallel; :mod:`~builder.build.variant`: one
variant's build, push and tags), the results and their reports (:mod:`~builder.build.results`)
and facts about the source (:mod:`~builder.build.source`). What happens after a push (signing,
provenance) is :mod:`builder.publish`, which also runs ``builder build`` as one call
(:func:`builder.publish.build_images`). Docs: docs/build.md.
"""
