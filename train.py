"""Train and evaluate one configuration: ``python train.py task=lm model=sru [key=value ...]``.

The Hydra entry point only; the pipeline (compose -> check -> seed -> task -> fit -> test) lives in
``tasks/engine/runner.py`` so that scripts and tests use it without importing this file.
"""
import hydra

from tasks.engine.runner import hydra_main, prepare_argv


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg):
    return hydra_main(cfg)


if __name__ == "__main__":
    prepare_argv()
    main()
