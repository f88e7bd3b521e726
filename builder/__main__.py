"""The ``builder`` process: ``python -m builder`` and the ``builder`` console script (pyproject
``[project.scripts]``) both start here, the one entry point of a builder process.

:func:`run` pauses the cyclic garbage collector while the command line and the invoked command's
module are imported, and :func:`builder.cli.main` resumes it (after ``gc.freeze``) before the
command's own work starts, so a long ``build``, ``run`` or ``status`` collects as any program does.
Importing ~300 modules allocates hundreds of thousands of objects that live as long as the
process; collecting while they are created walks them again and again for nothing (3 % of a
``builder resolve``'s instructions; issue 19). ``gc.freeze`` moves what start-up made to the
permanent generation, which later collections skip
(https://docs.python.org/3/library/gc.html#gc.freeze, the pattern the documentation gives for
start-up objects). In-process callers (``builder.cli.main(argv)``, the tests) keep their collector.
"""

import gc


def run() -> None:
    """Run the ``builder`` command line on ``sys.argv``; leaves by ``sys.exit`` as
    :func:`builder.cli.main` does."""
    if gc.isenabled():
        gc.disable()
        paused = True
    else:  # the embedding interpreter turned it off: leave it as it is
        paused = False
    from builder.cli import main

    main(resume_collector=paused)


if __name__ == "__main__":
    run()
