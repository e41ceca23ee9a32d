from dynspec_cli.engines.sglang.server_args import parse_dump


def test_dataclass_repr_with_nested_values_and_quotes():
    fields, complete = parse_dump("ServerArgs(model_path='/m,odel', tp_size=8, x=[1, (2, 3)], y={'a': 'b)c'}, "
                                  "speculative_algorithm='EAGLE3', disable_overlap_schedule=True, s=\"it's\", none=None)")
    assert complete
    assert fields["model_path"] == "/m,odel"
    assert fields["tp_size"] == 8 and fields["x"] == [1, (2, 3)] and fields["y"] == {"a": "b)c"}
    assert fields["disable_overlap_schedule"] is True and fields["s"] == "it's" and fields["none"] is None


def test_truncated_dump_keeps_every_complete_item():
    fields, complete = parse_dump("ServerArgs(model_path='/shared/kimi-k2.5-int4', tokenizer_mode='auto', trust_remote_cod")
    assert not complete
    assert fields == {"model_path": "/shared/kimi-k2.5-int4", "tokenizer_mode": "auto"}


def test_truncated_inside_a_string_drops_the_open_item():
    fields, complete = parse_dump("ServerArgs(a=1, b='unterminated, c=3")
    assert fields == {"a": 1} and not complete


def test_dict_form_of_newer_releases():
    fields, complete = parse_dump("{'model_path': 'm', 'speculative_algorithm': None, 'max_running_requests': 48, 'disable_overlap_schedule': False}")
    assert complete and fields["speculative_algorithm"] is None and fields["max_running_requests"] == 48
    assert fields["disable_overlap_schedule"] is False


def test_enum_and_object_reprs_are_kept_as_text():
    fields, _ = parse_dump("ServerArgs(kind=<Kind.A: 1>, z=2)")
    assert fields["kind"] == "<Kind.A: 1>" and fields["z"] == 2


def test_not_a_dump():
    assert parse_dump("hello") == ({}, False)
