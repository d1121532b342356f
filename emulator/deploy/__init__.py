"""The deployer: a SAM template and its samconfig.toml deployed onto the local moto server, the
way `sam deploy` and CloudFormation would (``deployer``), and the steps it is made of: the
samconfig (``samconfig``), each parameter checked against its constraints (``parameters``), the
template's Rules and Conditions (``rules``), SAM translated to CloudFormation offline
(``translate``), where each function's code and layers are (``function_code``), the gaps moto's
CloudFormation leaves closed through the services' APIs (``gaps``) and the functions' settings
for the workers (``functions``)."""
