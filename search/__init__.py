"""Schedule search: measurement, records, tuners, sketches, evolutionary search and the cost model."""
