def run_detokenizer_process(server_args, port_args):
    return None
