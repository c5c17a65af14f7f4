"""One verification run: the names of the run layer in one place.

A run lives in a run directory (`runstore`): every finished claim is saved the moment it
finishes, so `kill -9` loses at most the claims in flight, and those cost nothing to redo because
every model call is cached. Running the same job again (or `veritrail resume RUN_DIR`) finishes
the rest. See docs/running.md.

Nothing here prints or exits: bad input raises `JobInputError` (exit status 2 in the CLI),
a model failure outside any claim raises `ClaimExtractionError` (status 3), and the caller maps
them. The run is cut by concern, and this module re-exports each part's public names:

* `run.spec`: `Job`, `InMemoryDag`, the errors (`JobError`, `JobInputError`,
  `ClaimExtractionError`) and the run directory's own file names;
* `run.inputs`: every check before a model call, and `prepare_job`;
* `run.resume`: `job_from_run_dir` (`veritrail resume`);
* `run.build`: the model (`build_model`, over `run.model_spec.ModelSpec`) and the steps
  (`build_steps`, `step_specs`, `check_oracle_alone`);
* `run.execute`: `run_job`, `run_to_report`, `RunState`, interruptions, partial reports;
* `run.outputs`: `write_outputs`; the exit policy (`ExitCode`, `exit_code`) is
  `veritrail.outcome`'s, beside the report.
"""

from __future__ import annotations

from ..outcome import ExitCode as ExitCode
from ..outcome import exit_code as exit_code
from .build import ORACLE_ALONE as ORACLE_ALONE
from .build import build_model as build_model
from .build import build_steps as build_steps
from .build import check_oracle_alone as check_oracle_alone
from .build import job_steps as job_steps
from .execute import Interruption as Interruption
from .execute import RunOutcome as RunOutcome
from .execute import RunState as RunState
from .execute import extract_claims as extract_claims
from .execute import interruption_of as interruption_of
from .execute import record_interruption as record_interruption
from .execute import run_and_write as run_and_write
from .execute import run_job as run_job
from .execute import run_to_report as run_to_report
from .execute import write_partial_report as write_partial_report
from .inputs import check_output_files as check_output_files
from .inputs import check_outputs as check_outputs
from .inputs import check_prompt_dir as check_prompt_dir
from .inputs import check_run_dir as check_run_dir
from .inputs import html_target as html_target
from .inputs import input_paths as input_paths
from .inputs import job_settings as job_settings
from .inputs import load_job_dag as load_job_dag
from .inputs import model_name as model_name
from .inputs import prepare_job as prepare_job
from .inputs import run_dir_files as run_dir_files
from .inputs import same_file as same_file
from .outputs import write_outputs as write_outputs
from .resume import job_from_run_dir as job_from_run_dir
from .settings import step_specs as step_specs
from .spec import DAG_FILE as DAG_FILE
from .spec import HTML_BESIDE as HTML_BESIDE
from .spec import PARTIAL_REPORT as PARTIAL_REPORT
from .spec import RUN_DIR_FILES as RUN_DIR_FILES
from .spec import ClaimExtractionError as ClaimExtractionError
from .spec import InMemoryDag as InMemoryDag
from .spec import Job as Job
from .spec import JobError as JobError
from .spec import JobInputError as JobInputError
