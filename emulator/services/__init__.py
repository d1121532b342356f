"""moto 5.2.5 fixed per AWS service where it differs from AWS, the CloudFormation models moto
lacks beside them; installed in the process that serves moto."""
