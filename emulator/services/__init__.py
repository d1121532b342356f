"""moto 5.2.6 fixed per AWS service where it differs from AWS, the CloudFormation models moto
lacks beside them; installed in the process that serves moto."""
