from tests.support.sshd import ssh_lab  # noqa: F401  (session fixture: a real sshd on 127.0.0.1)
