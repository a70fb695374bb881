-- Wake-ups for every process sharing the database (store.Notifier): a job
-- that becomes pending (a submit, a requeue, a release) NOTIFYs channel
-- agentbox with 'p:<job id>', an appended event with 'e:<job id>:<seq>'.
-- Notifications are sent when the transaction commits, so a listener that
-- re-reads the store on one sees the row. Payloads stay far below
-- pg_notify's 8000 bytes: job ids are short.

CREATE FUNCTION agentbox_notify_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentbox', 'p:' || NEW.id);
    RETURN NULL;
END
$$;

CREATE FUNCTION agentbox_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentbox', 'e:' || NEW.job_id || ':' || NEW.seq);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_pending_insert AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status = 'pending')
    EXECUTE FUNCTION agentbox_notify_pending();

-- Only a change to pending: rewriting a job that already was pending must
-- not wake every worker.
CREATE TRIGGER jobs_notify_pending_update AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
    EXECUTE FUNCTION agentbox_notify_pending();

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION agentbox_notify_event();
