"""CloudWatch on the local stack: the services' metrics (service_metrics.py), the functions' EMF
lines as metrics (emf.py), the alarms evaluated (alarms.py), one thread running them
(monitor.py); the store and the API are moto's (emulator/services/cloudwatch.py)."""
