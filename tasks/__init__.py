"""The experiment framework: ``tasks.engine`` (the machinery every task runs on), ``tasks.common``
(what tasks share to build models and data) and one folder per task (``lm``, ``classification``,
``squad``, ``translation``, ``speech``), each importing only the two shared packages and ``sru``."""
