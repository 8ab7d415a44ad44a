//! Frames that open nothing: PRIORITY, RST_STREAM, SETTINGS, WINDOW_UPDATE
//! (PING and GOAWAY are one-liners in the dispatch).

use super::streams::{Closure, StreamState};
use super::{protocol, Connection};
use crate::frame::{self, ConnError, ErrorCode, Head};

impl Connection {
    pub(super) fn priority(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(protocol("PRIORITY on stream 0"));
        }
        if head.len != 5 {
            return Err(ConnError::new(ErrorCode::FrameSize, "PRIORITY length"));
        }
        // Priorities are otherwise ignored; a stream cannot depend on
        // itself (RFC 9113 §5.3.1): a stream error.
        if frame::u31(payload) == head.stream {
            self.reset(head.stream, ErrorCode::Protocol);
        }
        Ok(())
    }

    pub(super) fn rst_stream(&mut self, head: Head, _payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(protocol("RST_STREAM on stream 0"));
        }
        if head.len != 4 {
            return Err(ConnError::new(ErrorCode::FrameSize, "RST_STREAM length"));
        }
        if head.stream > self.last_stream {
            return Err(protocol("RST_STREAM on an idle stream"));
        }
        match self.streams.get_mut(&head.stream).map(|s| &mut s.state) {
            // The handler runs on: the stream keeps its place under the
            // concurrency limit until it is done.
            Some(state @ StreamState::Running) => *state = StreamState::Cancelled,
            Some(StreamState::Cancelled) | None => {}
            Some(_) => self.close_stream(head.stream, Closure::Finished),
        }
        Ok(())
    }

    pub(super) fn settings(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(protocol("SETTINGS on a stream"));
        }
        if head.flags & frame::ACK != 0 {
            if head.len != 0 {
                return Err(ConnError::new(
                    ErrorCode::FrameSize,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(());
        }
        for (id, value) in frame::settings(payload)? {
            match id {
                frame::SETTINGS_ENABLE_PUSH if value > 1 => {
                    return Err(protocol("SETTINGS_ENABLE_PUSH must be 0 or 1"));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value > frame::MAX_WINDOW {
                        return Err(ConnError::new(
                            ErrorCode::FlowControl,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                        if s.send_window > i64::from(frame::MAX_WINDOW) {
                            return Err(ConnError::new(
                                ErrorCode::FlowControl,
                                "a stream window grew above 2^31-1",
                            ));
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MIN_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value) {
                        return Err(protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = value as usize;
                }
                // The encoder never uses the dynamic table, so the peer's
                // table size does not matter; the rest needs no action.
                _ => {}
            }
        }
        frame::put_frame(self.out.back(), frame::SETTINGS, frame::ACK, 0, &[]);
        self.pump();
        Ok(())
    }

    pub(super) fn window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.len != 4 {
            return Err(ConnError::new(ErrorCode::FrameSize, "WINDOW_UPDATE length"));
        }
        let inc = i64::from(frame::u31(payload));
        let max = i64::from(frame::MAX_WINDOW);
        if head.stream == 0 {
            if inc == 0 {
                return Err(protocol("WINDOW_UPDATE with increment 0"));
            }
            self.send_window += inc;
            if self.send_window > max {
                return Err(ConnError::new(
                    ErrorCode::FlowControl,
                    "connection window above 2^31-1",
                ));
            }
        } else if head.stream > self.last_stream {
            return Err(protocol("WINDOW_UPDATE on an idle stream"));
        } else if let Some(s) = self.streams.get_mut(&head.stream) {
            if inc == 0 {
                self.reset(head.stream, ErrorCode::Protocol);
                return Ok(());
            }
            s.send_window += inc;
            if s.send_window > max {
                self.reset(head.stream, ErrorCode::FlowControl);
                return Ok(());
            }
        }
        self.pump();
        Ok(())
    }
}
