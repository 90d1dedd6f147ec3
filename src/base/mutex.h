// A mutex whose lock rules the compiler checks: Clang's -Wthread-safety
// analysis (the sanitizer tree builds with it, warnings as errors) reads
// PC_GUARDED_BY on fields and PC_REQUIRES / PC_EXCLUDES on functions, and
// rejects an access to a guarded field without its mutex held. Under GCC the
// annotations are empty. Wait on a condition with MutexLock::Wait in a loop
// that tests the condition in the locked scope, so the analysis sees those
// reads under the lock.
// Thread-safety: Mutex and CondVar are thread-safe; a MutexLock belongs to
// the thread that made it.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define PC_TSA(x) __attribute__((x))
#else
#define PC_TSA(x)
#endif

#define PC_CAPABILITY(name) PC_TSA(capability(name))
#define PC_SCOPED_CAPABILITY PC_TSA(scoped_lockable)
#define PC_GUARDED_BY(mu) PC_TSA(guarded_by(mu))
#define PC_PT_GUARDED_BY(mu) PC_TSA(pt_guarded_by(mu))
#define PC_REQUIRES(...) PC_TSA(requires_capability(__VA_ARGS__))
#define PC_EXCLUDES(...) PC_TSA(locks_excluded(__VA_ARGS__))
#define PC_ACQUIRE(...) PC_TSA(acquire_capability(__VA_ARGS__))
#define PC_RELEASE(...) PC_TSA(release_capability(__VA_ARGS__))
#define PC_RETURN_CAPABILITY(x) PC_TSA(lock_returned(x))
#define PC_NO_THREAD_SAFETY_ANALYSIS PC_TSA(no_thread_safety_analysis)

namespace pc {

class PC_CAPABILITY("mutex") Mutex {
 public:
  void Lock() PC_ACQUIRE() { mu_.lock(); }
  void Unlock() PC_RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope (and may give it up for a while in Wait).
class PC_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) PC_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() PC_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases the mutex until cv is notified (or spuriously), then retakes
  // it: callers loop on their condition.
  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  // As Wait, for at most `timeout`; false when it timed out.
  template <class Rep, class Period>
  bool WaitFor(std::condition_variable& cv, std::chrono::duration<Rep, Period> timeout) {
    return cv.wait_for(lock_, timeout) == std::cv_status::no_timeout;
  }
  // Until the deadline; false when it passed.
  template <class Clock, class Duration>
  bool WaitUntil(std::condition_variable& cv, std::chrono::time_point<Clock, Duration> deadline) {
    return cv.wait_until(lock_, deadline) == std::cv_status::no_timeout;
  }
  // Gives the mutex up for the rest of the scope's work that needs none, and
  // takes it back (the analysis sees both).
  void Unlock() PC_RELEASE() { lock_.unlock(); }
  void Lock() PC_ACQUIRE() { lock_.lock(); }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace pc
