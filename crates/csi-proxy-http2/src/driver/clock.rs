//! The connection's own timers: preface, idle, keepalive, linger.

use super::{Options, State};
use crate::conn::Connection;
use crate::service::Service;
use std::time::Duration;
use tokio::time::Instant;

/// The connection's timers besides call deadlines: preface, idle,
/// keepalive.
pub(super) struct Clock {
    idle_timeout: Duration,
    keepalive_time: Duration,
    keepalive_timeout: Duration,
    linger: Duration,
    /// When something last arrived from the client.
    last_read: Instant,
    /// When the connection last had no open stream, if it has none now.
    idle_since: Option<Instant>,
    /// Our unanswered keepalive PING.
    ping_sent: Option<Instant>,
    pings: u64,
    /// When the connection was done (failed, or GOAWAY with nothing left
    /// open) while output still waited for the client.
    done_since: Option<Instant>,
}

impl Clock {
    pub(super) fn new(options: &Options, now: Instant) -> Self {
        Clock {
            idle_timeout: options.idle_timeout,
            keepalive_time: options.keepalive_time,
            keepalive_timeout: options.keepalive_timeout,
            linger: options.linger,
            last_read: now,
            idle_since: None,
            ping_sent: None,
            pings: 0,
            done_since: None,
        }
    }

    pub(super) fn heard(&mut self, now: Instant) {
        self.last_read = now;
        self.ping_sent = None;
    }

    pub(super) fn update(&mut self, conn: &Connection, now: Instant) {
        // Frames left unread behind output the client does not read are no
        // activity either.
        let idle = conn.preface_received() && conn.open_streams() == 0;
        match (idle, self.idle_since) {
            (true, None) => self.idle_since = Some(now),
            (false, Some(_)) => self.idle_since = None,
            _ => {}
        }
        if conn.is_done() && self.done_since.is_none() {
            self.done_since = Some(now);
        }
    }

    /// The earliest thing to do.
    pub(super) fn next<S: Service>(
        &self,
        conn: &Connection,
        state: &State<S>,
        preface_deadline: Instant,
    ) -> Option<Instant> {
        let mut next = state
            .in_flight
            .values()
            .filter(|f| !f.answered)
            .filter_map(|f| f.deadline)
            .min();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(self.done_since.map(|t| t + self.linger));
        if !conn.preface_received() {
            consider(Some(preface_deadline));
            return next;
        }
        if conn.open_streams() > 0 {
            consider(conn.next_receive_deadline().map(Instant::from_std));
        }
        if !self.idle_timeout.is_zero() {
            consider(self.idle_since.map(|t| t + self.idle_timeout));
        }
        if !self.keepalive_time.is_zero() {
            consider(Some(match self.ping_sent {
                Some(t) => t + self.keepalive_timeout,
                None => self.last_read + self.keepalive_time,
            }));
        }
        next
    }

    /// Do what is due at `now`; false if the connection must close at once.
    pub(super) fn fire<S: Service>(
        &mut self,
        conn: &mut Connection,
        state: &mut State<S>,
        preface_deadline: Instant,
        now: Instant,
    ) -> bool {
        state.expire_calls(conn, now);
        if self.done_since.is_some_and(|t| now >= t + self.linger) {
            tracing::debug!("closing a finished connection whose client does not read");
            return false;
        }
        if !conn.preface_received() {
            if now >= preface_deadline {
                tracing::debug!("closing a connection that never sent the HTTP/2 preface");
                return false;
            }
            return true;
        }
        conn.expire_receives();
        if !self.idle_timeout.is_zero()
            && self
                .idle_since
                .is_some_and(|t| now >= t + self.idle_timeout)
        {
            tracing::debug!("closing an idle connection");
            conn.go_away();
        }
        if !self.keepalive_time.is_zero() {
            match self.ping_sent {
                Some(t) if now >= t + self.keepalive_timeout => {
                    tracing::debug!("closing a connection whose client stopped answering");
                    return false;
                }
                None if now >= self.last_read + self.keepalive_time => {
                    self.pings += 1;
                    conn.ping(self.pings.to_be_bytes());
                    self.ping_sent = Some(now);
                }
                _ => {}
            }
        }
        true
    }
}
