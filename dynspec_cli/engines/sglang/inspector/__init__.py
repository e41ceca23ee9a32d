"""dynspec preflight inspector: what the sglang on THIS interpreter will run, read without running it.

Runs inside someone else's interpreter (the one that will start the sglang server, possibly on a
remote GPU host), so: stdlib only, Python 3.8+, nothing from dynspec but the inspectors' shared
module (dynspec_cli/inject/inspector_common.py: the marker scan, module resolution, static MRO,
dotted targets, the diff parser). One module per concern (locate, diff, bytecode, flags, values,
envvars, dynamic, plugins, draft; main drives them); dynspec ships the folder as ONE program
(dynspec_cli.inject.program: the modules and the shared one bundled, imported from memory) on
stdin behind a constant ``python -c`` bootstrap. ``python -m
dynspec_cli.engines.sglang.inspector < input.json`` runs the folder in place.
Prints exactly one JSON document on stdout, also when it fails (then ``"ok": false`` with ``error``
and ``exception_traceback``). Exit status 0 when ``ok``, 1 otherwise; callers parse stdout either way.
Everything sglang or a C extension writes to fd 1 while we work is sent to stderr.

Input: one JSON object on stdin (never on a command line: env values may be secrets, diffs are big)::

    marker_literal   str   substring of the log line the patch emits          (required)
    marker_pattern   str   Python regex of that line; checked against the source template
    flag             str   the server flag the patch adds, e.g. --speculative-disable-batch-threshold
    flags            [str] sglang server flags the user will pass (checked statically; dynamic route input)
    patch_diff       str   unified diff the user applied
    env              {str: str|null}  environment overrides for the dynamic route (null unsets)
    dynamic          bool  also import sglang and run its real argument resolution (default false)
    sglang_path      str   directory put first on sys.path (tests; a site-style dir holding sglang/)
    env_vars         [str] names looked up in srt/environ.py (default ["SGLANG_ENABLE_SPEC_V2"])
    list_flags       bool  include every accepted option string in the output (default false)
    hide_accelerators bool dynamic route: CUDA_VISIBLE_DEVICES etc. set to "" so no GPU is touched (default true)
    default_device   str|null  dynamic route: --device added when flags have none (default "cuda")
    plugin           {entry_point, group, allow_env, platform_group, platform_env, target,
                      framework_module, processes [{name, module, function}]} | null: the patch is a plugin

Output (``schema`` = "dynspec-inspector/1"); paths are absolute, lines 1-based::

    ok, error, exception_traceback, warnings[]         failure is data: ok=false + error (+ traceback)
    python     executable, version, cache_tag, prefix, in_venv, cwd, sys_path[]
    input      the arguments as understood (patch_diff replaced by patch_diff_chars, env values by "<set>")
    sglang     found, package_dir, origin, version (+ version_source), dist_version, version_py,
               metadata_version, dist_info, direct_url, in_site_packages, editable, editable_evidence[]
               {kind: direct_url.json|editable-finder|import-hook|path|egg-link|source-checkout, file},
               source_root, build_copies[] {path, version_py, on_sys_path},
               installs[] {package_dir, sys_path_entry, via, version_py, dist_version, active},
               multiple_installs, modified_since_install {checked, changed[], added[], missing[]}
               (sizes vs the wheel's RECORD, under sglang/srt), changed_files {checked, reason, record,
               files_hashed, changed[] {path, sha256 (hex)}, missing[], seconds} (sha256 of every .py the
               dist-info RECORD lists, against it; an editable install: checked false with the reason);
               when not found: reason
    marker     literal, pattern, files_scanned, files_with_literal[], files_with_words[],
               hits[] {file, line, kind: str|fstring|non-string|syntax-error-file, call, template, text,
                       class, class_line, bases[] (as written), function, function_line, qualname,
                       pattern_matches}, hits_in_other_installs[] (only when the active one has none)
    diff       given, parse_errors[], missing_files[], files[] {diff_path, installed_path, present, new_file,
               deleted, hunks[] {header, new_start, new_count, added[[a,b]], applied: exact|offset|
               not-applied|differs|file-missing, offset, scopes[] {lines[a,b], class, function, qualname, ...}}}
    files[]    every patched file (marker, diff, modified since install, flag's home): file, roles[],
               compiles, syntax_error {line, col, message, text, where="file:line: message"},
               pyc[] {path, tag, validation, stale, used_by_this_interpreter, stale_code_runs, ...},
               stale_pyc, stale_code_runs
    flags      count, sources[] {file, style: add_argument|annotated-field, count}, errors[],
               no_cli_fields{}, feature_flag and user_flags[]: {flag, option, defined, accepted,
               abbreviation_of, ambiguous[], defined_at {file, line, style, class, action},
               values (accepted user flags) {type (as written: int, float, str, json.loads, ...),
               choices[] | null (+ choices_unknown when not a literal), nargs, action}}, options[]
    env_defaults  {NAME: {present, file, line, raw, kind (e.g. EnvBool), default}}
    environ    {NAME: value | null} for env_vars: the inspector's own environment (the host's, with
               `env` applied), which is what a server started the same way gets
    dynamic    null, or {ok, stage, flags[] (as run), env_applied, resolution_api, imported_from,
               resolved {speculative_algorithm, disable_overlap_schedule, speculative_eagle_topk,
               speculative_num_steps, speculative_num_draft_tokens, max_running_requests,
               enable_multi_layer_eagle, device, <flag's field>}, missing_fields[],
               worker {module, class, placeholder, requested[], file, exists, mro {classes[] {name,
               module, file, line, bases_as_written[], bases[], methods[], resolved}, method}},
               log[] {logger, level, message, file, line}, python_warnings[], stderr, notes[],
               error {stage: import|resolve|worker, type, message, traceback, exit_code}}
    plugin     null, or {entry_point, group, framework {module, file|null}, discovery {candidates[]
               {distribution, version, metadata, kind: dist-info|egg-info, value, module, attr,
               module_file, attr_found, files[], metadata_files[], marker_hits[], seen_by_engine}, loaded (index of the
               one the engine keeps), visible, other_names[], unreadable[] {metadata, error},
               engine_error (entry_points() raised)}, allow {env, value, names[]|null, allowed,
               platform {env, value, excluded}|null}, target {target, module, module_file, kind:
               module|function|class|method|missing|unknown, class, class_module, attr, defined_in,
               line, missing}, processes[] {name, module, function, file, found, loads, line}}
    timings    seconds since start, per stage
"""
