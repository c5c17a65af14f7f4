"""The VeriTrail method itself (docs/method.md): the engine every run, API call and detector uses.

One module per step, named after it: `subclaims` (decomposition), `evidence` (selection), `verdict`
(verdict generation with compression), `loop` (Algorithm 1 over the DAG), `traceability`
(provenance and error stages), `extraction` (claims from a final output). `config` holds the
method's settings and their defaults, `steps` the step interfaces, `prompting` the templates in
`prompts/` and the one `fence()` for untrusted text. The run fingerprint hashes this folder: code
here decides what a verification computes (docs/architecture.md).
"""
