"""The one error every step of a deploy raises: what CloudFormation or SAM would refuse."""


class DeployError(RuntimeError):
    pass
