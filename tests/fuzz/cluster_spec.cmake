# cluster.yaml parser (controller/cluster_spec): seeds are the shipped examples and small variants.
tandem_add_fuzz(cluster_spec LIBS tandem_controller)
