# postgres: a PostgreSQL server for a small or development cluster, Debian's
# package (apt-get install postgresql) run as the postgres user with its
# data in a directory of one node. scripts/nomad-dev.sh runs it. For a real
# cluster use an external, backed-up PostgreSQL (a managed database, or one
# your team already runs) and skip this job: agentbox needs nothing but its
# URL in AGENTBOX_STORE. See docs/deploy.md.
#
# It is pinned to the node named node_name because its data lives there;
# it listens on a static port so the URL in the agentbox variables holds.
# Authentication is trust on listen_address: bind it to an address only
# the cluster reaches, or set a password and pg_hba.conf yourself.

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "node_name" {
  description = "the node that keeps the data"
  type        = string
}

variable "data_dir" {
  description = "the server's directory on that node (data/, its socket)"
  type        = string
  default     = "/var/lib/agentbox-postgres"
}

variable "listen_address" {
  type    = string
  default = "127.0.0.1"
}

variable "port" {
  type    = number
  default = 5432
}

variable "database" {
  type    = string
  default = "agentbox"
}

job "agentbox-postgres" {
  datacenters = var.datacenters
  type        = "service"

  constraint {
    attribute = "${node.unique.name}"
    value     = var.node_name
  }

  group "postgres" {
    network {
      port "db" {
        static = var.port
      }
    }

    service {
      name     = "agentbox-postgres"
      provider = "nomad"
      port     = "db"

      check {
        type     = "tcp"
        interval = "5s"
        timeout  = "2s"
      }
    }

    restart {
      attempts = 5
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    task "postgres" {
      driver = "raw_exec"

      # The server refuses to run as root: initdb and postgres run as the
      # postgres user (setpriv execs, so Nomad's signals reach postgres).
      config {
        command = "/bin/sh"
        args    = ["${NOMAD_TASK_DIR}/start.sh"]
      }

      template {
        destination = "${NOMAD_TASK_DIR}/start.sh"
        perms       = "0755"
        data        = <<-EOT
        #!/bin/sh
        set -eu
        bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
        dir='${var.data_dir}'
        as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
        mkdir -p "$dir"
        chown postgres: "$dir"
        chmod 0700 "$dir"
        if [ ! -f "$dir/data/PG_VERSION" ]; then
          as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8
          # Create the database in single-user mode, before anyone connects.
          echo 'CREATE DATABASE ${var.database};' | as_pg "$bin/postgres" --single -D "$dir/data" postgres >/dev/null
        fi
        cd "$dir"
        exec setpriv --reuid=postgres --regid=postgres --init-groups \
          "$bin/postgres" -D "$dir/data" -k "$dir" \
          -c listen_addresses='${var.listen_address}' -p "$NOMAD_PORT_db"
        EOT
      }

      # SIGINT is PostgreSQL's fast shutdown: sessions end, data is flushed.
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
