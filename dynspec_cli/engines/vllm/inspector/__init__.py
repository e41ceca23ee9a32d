"""dynspec preflight inspector for vLLM: facts about the vllm on THIS interpreter, read without importing it.

Runs inside someone else's interpreter (shipped as one program by dynspec_cli.inject.program, its
JSON input as argv[1]), so: stdlib only, Python 3.8+, nothing from dynspec but the inspectors' shared
module (marker scan, static MRO, dotted targets: dynspec_cli/inject/inspector_common.py, bundled
beside these modules), no `import vllm` outside dynamic.py (importing it pulls torch and CUDA
probing: seconds, and it may fail on a machine without a GPU). Prints exactly one JSON document on
stdout, also when it fails (then ``"ok": false`` with ``error``). Conclusions (which runner, which
proposer, dead knobs) are drawn by dynspec from configs/vllm/ (engines/vllm/preflight.py): this
program only reads. One module per concern: main (the driver, where vllm is, the marker, the
classes), plugins (a general plugin, a custom proposer class), dynamic (vLLM's own resolution).

Input: one JSON object as argv[1] (``@PATH`` reads it from a file)::

    marker_literal  str    substring of the log line the patch emits (required)
    marker_pattern  str    its regex (reported per hit: does the source template match it)
    classes         [{module, class}]  classes whose static MRO to report (module: path under site-packages)
    env_names       [str]  environment variables to report (default ["VLLM_USE_V2_MODEL_RUNNER"])
    vllm_path       str    directory put first on sys.path (tests: an unpacked wheel)
    plugin          {entry_point, group, allow_env, allow_strips, target}  a patch shipped as a general plugin
    custom_class    {path, framework_module}  the user's proposer class (--speculative-config method custom_class)
    dynamic         bool   also run vLLM's own config resolution (imports vllm and torch: ~8 s on a CPU)
    serve_flags     [str]  the `vllm serve` flags (dynamic route; must include --model)
    patch_diff      str    the user's unified diff (--patch), mapped onto this vllm's files

Output (``schema`` = "dynspec-vllm-inspector/1")::

    ok, error, python {executable, version}, input (the input, patch_diff replaced by patch_diff_chars),
    env {NAME: value|null},
    dynamic null | {ok, seconds, use_v2_model_runner, unsupported_v2[], method, num_spec_tokens,
            data_parallel_size, warnings[] (vLLM's own log records), error {type, message}},
    vllm {found, package_dir, version, version_source, reason},
    triton {found, origin}, marker {literal, files_scanned, hits[] {file, line, class, function, pattern_matches}},
    classes {"module:Class": {present, file, line, mro[] {class, module}}},
    plugin {group, candidates[] {distribution, version, metadata, value, module, attr, module_file, attr_found,
            marker_hits[]}, loaded (index: the last one vLLM keeps), shadowed[], other_names[],
            allow {env, value, names, allowed}, target {module, module_file, kind, class, attr, line, missing}},
    custom_class {path, framework, module, cls, module_file, line, bases[], bases_outside, methods {name: {class,
            line, args, varargs}}, marker_hits[], missing},
    diff {given: false} | {given, files[] {diff_path, installed_path, present, new_file, deleted, hunks[] {header,
            new_start, new_count, added, applied (exact|offset|not-applied|differs|file-missing|unknown), offset,
            mismatch, scopes[] {class, function, qualname, lines, marker, behaviour, ...}}}, missing_files[],
            parse_errors[]} (the shared analysis, as sglang's inspector reports it)
"""
